// FakeClock: a Clock whose time moves only when a test says so.
//
// Both the wall and the steady time start at the given instants and move together in Advance(); StepWall()
// moves the wall time alone, as a clock step does. Advance() wakes every thread blocked in WaitUntil whose
// deadline has been reached. Tests that must know a worker is
// asleep before they move time call WaitForWaiters(n), which blocks (on real time, with a deadline) until n
// threads are waiting. DatabaseNowOverride() returns the fake wall time, so stores compare against the test's
// time instead of the server's.
//
// Thread-safety: all methods may be called concurrently from any thread.
#ifndef OCTOP_TESTING_FAKE_CLOCK_H_
#define OCTOP_TESTING_FAKE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include <octop/clock.h>

namespace octop::testing {

class FakeClock final : public Clock {
 public:
  // Starts at 2026-01-01T00:00:00Z unless told otherwise.
  explicit FakeClock(WallTime start = DefaultStart());

  WallTime WallNow() const override;
  SteadyTime SteadyNow() const override;
  ClockReading Now() const override;
  WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal = nullptr) override;
  std::optional<WallTime> DatabaseNowOverride() const override { return WallNow(); }

  // Moves time forward by `d` (>= 0) and wakes the waiters whose deadline has come.
  void Advance(std::chrono::nanoseconds d);
  // Moves time to the earliest deadline any thread is waiting for; returns false (and does nothing) if none
  // waits.
  bool AdvanceToNextDeadline();
  // Steps the wall time alone by `d` (either way), as NTP or `date -s` would; the steady time stays.
  void StepWall(std::chrono::nanoseconds d);
  // Blocks until at least `n` threads are inside WaitUntil, or `timeout` of real time passes; returns whether
  // they are.
  bool WaitForWaiters(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  int waiters() const;

  static WallTime DefaultStart();

 private:
  struct Waiter {
    SteadyTime deadline;
    WakeSignal* signal;
    bool operator<(const Waiter& o) const { return signal < o.signal; }
  };
  void NotifyAll();

  const WallTime wall_start_;
  std::atomic<std::int64_t> offset_ns_{0};     // time advanced so far
  std::atomic<std::int64_t> wall_step_ns_{0};  // the wall clock's steps so far
  mutable std::mutex mu_;
  std::condition_variable waiters_changed_;
  std::set<Waiter> waiting_;  // guarded by mu_
};

}  // namespace octop::testing

#endif  // OCTOP_TESTING_FAKE_CLOCK_H_
