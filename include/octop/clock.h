// Clock: the one seam through which octop reads time and sleeps.
//
// Production code never calls std::chrono::*::now() or sleeps directly; it asks a Clock. RealClock reads the
// system clocks and waits on a condition variable; octop::testing::FakeClock (testing/fake_clock.h) only
// moves when a test calls Advance(), so time-dependent behaviour is tested without sleeps.
//
// Waits end at a steady-clock deadline, when a std::stop_token is triggered, or when a WakeSignal is notified
// (how a trigger cuts a worker's sleep short). Wall time (WallNow) is for timestamps shown to people and for
// cron; cross-node decisions use the database's clock, which DatabaseNowOverride() lets a fake clock replace
// in tests.
//
// Thread-safety: every Clock method may be called from any thread concurrently. A WakeSignal may be notified
// from any thread; it is meant to be waited on by one thread at a time.
#ifndef OCTOP_CLOCK_H_
#define OCTOP_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

namespace octop {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

// An auto-reset event: Notify() before a wait is remembered, and the wait that sees it consumes it.
class WakeSignal {
 public:
  void Notify();
  // Clears a pending notification without waiting; returns whether there was one.
  bool Consume();

 private:
  friend class RealClock;
  friend class FakeClockAccess;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool notified_ = false;
};

enum class WakeReason {
  kDeadline,   // the deadline was reached
  kStopped,    // the stop_token was triggered
  kSignalled,  // the WakeSignal was notified
};

class Clock {
 public:
  virtual ~Clock() = default;

  virtual WallTime WallNow() const = 0;
  virtual SteadyTime SteadyNow() const = 0;

  // Blocks until SteadyNow() >= deadline, `stop` is triggered, or `signal` (optional) is notified. A stop
  // that is already requested, or a pending notification, returns at once. Stop wins over a signal, a signal
  // over the deadline.
  virtual WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal = nullptr) = 0;

  WakeReason WaitFor(std::chrono::nanoseconds duration, std::stop_token stop, WakeSignal* signal = nullptr) {
    return WaitUntil(SteadyNow() + duration, std::move(stop), signal);
  }

  // The time a store must use as the database's "now", or nullopt to use the database server's own clock (the
  // production answer). A fake clock returns its wall time so that SQL comparisons follow the test's time.
  virtual std::optional<WallTime> DatabaseNowOverride() const { return std::nullopt; }

  // The process-wide real clock. Never destroyed.
  static Clock& Real();
};

// Watches the wall clock against the steady clock. A step of the wall clock (NTP setting the time, a VM
// resumed, `date -s`) shows as a jump in their difference; a slew does not reach the threshold between two
// checks. Leases and due times in the database are wall times, so whoever holds leases re-bases them after a
// step (docs/reliability.md, "Clock steps").
//
// Thread-safety: none; one owner thread calls Check().
class ClockStepWatch {
 public:
  // Smaller than any lease octop takes, larger than NTP's slewing (at most 0.5 ms per second) between checks.
  static constexpr std::chrono::milliseconds kThreshold{1000};

  explicit ClockStepWatch(const Clock& clock);
  // The wall clock's step since the previous call (or construction), when it is at least kThreshold either
  // way; nullopt otherwise. Each call starts the next comparison afresh, so slow drift never adds up.
  std::optional<std::chrono::nanoseconds> Check();
  // A step for a log line: "+7200.0 s", "-0.5 s".
  static std::string Describe(std::chrono::nanoseconds step);

 private:
  std::chrono::nanoseconds Offset() const;
  const Clock& clock_;
  std::chrono::nanoseconds offset_;
};

class RealClock final : public Clock {
 public:
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
  WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal = nullptr) override;
};

}  // namespace octop

#endif  // OCTOP_CLOCK_H_
