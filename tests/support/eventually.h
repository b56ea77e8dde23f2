// Eventually: how a test waits for a condition nothing can notify it of (a file another process writes, an
// HTTP answer, a metric) -- it re-checks the condition until it holds or a deadline passes. The re-check
// period is a cadence, not a wait for an event; a test that can be notified waits on the notification.
//
// Thread-safety: a free function; `condition` runs on the caller's thread.
#ifndef OCTOP_TESTS_SUPPORT_EVENTUALLY_H_
#define OCTOP_TESTS_SUPPORT_EVENTUALLY_H_

#include <chrono>
#include <functional>
#include <thread>

namespace octop::test_support {

// Whether `condition` held before `timeout` passed.
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30),
                       std::chrono::milliseconds recheck = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(recheck);
  }
  return true;
}

}  // namespace octop::test_support

#endif  // OCTOP_TESTS_SUPPORT_EVENTUALLY_H_
