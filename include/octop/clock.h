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
#include <utility>

namespace octop {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

// The wall and the steady clock read as one instant (Clock::Now).
struct ClockReading {
  WallTime wall;
  SteadyTime steady;
};

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
  // Both clocks at one instant, for translating a wall time to a steady one and back. Two separate reads can
  // straddle a preemption or, under a fake clock, an Advance, and the translation would be off by that much.
  // The default reads steady, wall, steady and retries a few times while the steady reads lie more than 1 ms
  // apart; a fake clock reads both at once.
  virtual ClockReading Now() const;

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

class RealClock final : public Clock {
 public:
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
  WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal = nullptr) override;
};

}  // namespace octop

#endif  // OCTOP_CLOCK_H_
