// Helpers shared by the runtime tests: a log sink that records lines, a call counter a task function bumps, a
// gate a task function blocks on, a real clock whose wall time a test can step, and a bounded wait for a
// condition. Every wait here has a real-time
// deadline, so a broken scheduler fails a test instead of hanging it.
//
// Thread-safety: every helper may be used from task threads and the test thread at once.
#ifndef OCTOP_TESTS_INTEGRATION_RUNTIME_TEST_SUPPORT_H_
#define OCTOP_TESTS_INTEGRATION_RUNTIME_TEST_SUPPORT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <octop/scheduler.h>

#include "../support/eventually.h"

namespace octop::runtime_testing {

inline constexpr std::chrono::milliseconds kWaitTimeout{10000};

// test_support::Eventually with the runtime tests' deadline, re-checking every millisecond (in-process
// conditions are cheap to read).
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = kWaitTimeout) {
  return test_support::Eventually(condition, timeout, std::chrono::milliseconds(1));
}

class LogCapture {
 public:
  Logger AsLogger() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(level, std::string(message));
    };
  }
  bool Contains(LogLevel level, std::string_view fragment) const {
    std::lock_guard lock(mu_);
    for (const auto& [l, text] : lines_) {
      if (l == level && text.find(fragment) != std::string::npos) return true;
    }
    return false;
  }
  int Count(LogLevel level, std::string_view fragment) const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [l, text] : lines_) n += l == level && text.find(fragment) != std::string::npos;
    return n;
  }
  std::string Dump() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [l, text] : lines_) out += std::string(LogLevelName(l)) + ": " + text + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
};

// Counts calls of a task function and lets the test wait for the n-th.
class CallCounter {
 public:
  void Hit() {
    {
      std::lock_guard lock(mu_);
      ++calls_;
    }
    cv_.notify_all();
  }
  int calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  bool WaitForCalls(int n, std::chrono::milliseconds timeout = kWaitTimeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return calls_ >= n; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
};

// A task function blocks in Wait() until the test opens the gate or the run's stop is requested.
class Gate {
 public:
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Returns true if the stop token (not the gate) ended the wait.
  bool Wait(std::stop_token stop) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, stop, [&] { return open_; });
    if (!open_) {
      stopped_ = true;
      cv_.notify_all();
    }
    return !open_;
  }
  bool WaitUntilStopObserved(std::chrono::milliseconds timeout = kWaitTimeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return stopped_; });
  }
  bool stop_observed() const {
    std::lock_guard lock(mu_);
    return stopped_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool open_ = false;
  bool stopped_ = false;
};

// The real clock with a wall time the test steps, as NTP or `date -s` steps a host's clock: waits and the
// steady time stay real. The database's now follows the stepped wall time, as SQLite's does on that host.
class SteppedClock final : public Clock {
 public:
  WallTime WallNow() const override {
    return Clock::Real().WallNow() + std::chrono::nanoseconds(step_ns_.load());
  }
  SteadyTime SteadyNow() const override { return Clock::Real().SteadyNow(); }
  WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal = nullptr) override {
    return Clock::Real().WaitUntil(deadline, std::move(stop), signal);
  }
  std::optional<WallTime> DatabaseNowOverride() const override { return WallNow(); }
  void Step(std::chrono::nanoseconds d) { step_ns_.fetch_add(d.count()); }

 private:
  std::atomic<std::int64_t> step_ns_{0};
};

inline Duration Ms(std::int64_t ms) { return Duration::FromMilliseconds(ms); }
inline Duration Iso(std::string_view text) { return Duration::ParseIso(text).value(); }

}  // namespace octop::runtime_testing

#endif  // OCTOP_TESTS_INTEGRATION_RUNTIME_TEST_SUPPORT_H_
