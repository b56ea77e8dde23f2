#include <atomic>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include <octop/clock.h>
#include <octop/testing/fake_clock.h>

namespace octop {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

TEST(RealClock, WaitEndsAtTheDeadline) {
  Clock& clock = Clock::Real();
  const auto start = clock.SteadyNow();
  EXPECT_EQ(clock.WaitFor(20ms, {}), WakeReason::kDeadline);
  EXPECT_GE(clock.SteadyNow() - start, 20ms);
  EXPECT_FALSE(Clock::Real().DatabaseNowOverride().has_value());
}

TEST(RealClock, StopEndsTheWaitEarly) {
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return Clock::Real().WaitFor(1h, stop.get_token()); });
  stop.request_stop();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), WakeReason::kStopped);
}

TEST(RealClock, SignalEndsTheWaitAndIsConsumed) {
  WakeSignal signal;
  auto waiter = std::async(std::launch::async, [&] { return Clock::Real().WaitFor(1h, {}, &signal); });
  signal.Notify();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), WakeReason::kSignalled);
  EXPECT_FALSE(signal.Consume());
}

TEST(RealClock, NotificationBeforeTheWaitIsRemembered) {
  WakeSignal signal;
  signal.Notify();
  EXPECT_EQ(Clock::Real().WaitFor(1h, {}, &signal), WakeReason::kSignalled);
}

TEST(RealClock, AlreadyStoppedReturnsAtOnceAndStopBeatsSignal) {
  std::stop_source stop;
  stop.request_stop();
  WakeSignal signal;
  signal.Notify();
  EXPECT_EQ(Clock::Real().WaitFor(1h, stop.get_token(), &signal), WakeReason::kStopped);
}

TEST(FakeClock, TimeMovesOnlyOnAdvance) {
  FakeClock clock;
  const WallTime wall = clock.WallNow();
  const SteadyTime steady = clock.SteadyNow();
  EXPECT_EQ(wall, FakeClock::DefaultStart());
  clock.Advance(90s);
  EXPECT_EQ(clock.WallNow() - wall, 90s);
  EXPECT_EQ(clock.SteadyNow() - steady, 90s);
  EXPECT_EQ(clock.DatabaseNowOverride(), clock.WallNow());
}

TEST(FakeClock, AdvanceWakesWaitersWhoseDeadlineCame) {
  FakeClock clock;
  auto soon = std::async(std::launch::async, [&] { return clock.WaitFor(10s, {}); });
  auto later = std::async(std::launch::async, [&] { return clock.WaitFor(60s, {}); });
  ASSERT_TRUE(clock.WaitForWaiters(2));
  clock.Advance(9s);
  EXPECT_EQ(clock.waiters(), 2);  // nobody's deadline has come yet
  clock.Advance(1s);
  ASSERT_EQ(soon.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(soon.get(), WakeReason::kDeadline);
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(clock.waiters(), 1);
  EXPECT_TRUE(clock.AdvanceToNextDeadline());
  ASSERT_EQ(later.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(later.get(), WakeReason::kDeadline);
  EXPECT_EQ(clock.SteadyNow() - (FakeClock().SteadyNow()), 60s);
  EXPECT_FALSE(clock.AdvanceToNextDeadline());
}

TEST(FakeClock, SignalAndStopWakeWithoutTimeMoving) {
  FakeClock clock;
  WakeSignal signal;
  std::stop_source stop;
  auto by_signal = std::async(std::launch::async, [&] { return clock.WaitFor(1h, {}, &signal); });
  auto by_stop = std::async(std::launch::async, [&] { return clock.WaitFor(1h, stop.get_token()); });
  ASSERT_TRUE(clock.WaitForWaiters(2));
  signal.Notify();
  stop.request_stop();
  ASSERT_EQ(by_signal.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(by_stop.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(by_signal.get(), WakeReason::kSignalled);
  EXPECT_EQ(by_stop.get(), WakeReason::kStopped);
  EXPECT_EQ(clock.WallNow(), FakeClock::DefaultStart());
}

TEST(FakeClock, PastDeadlineReturnsAtOnce) {
  FakeClock clock;
  EXPECT_EQ(clock.WaitUntil(clock.SteadyNow(), {}), WakeReason::kDeadline);
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(FakeClock, WaitForWaitersTimesOutWhenNobodyWaits) {
  FakeClock clock;
  EXPECT_FALSE(clock.WaitForWaiters(1, 10ms));
}

// Reads both clocks while another thread advances them: any pair not read at one instant shows as a wall
// clock ahead of or behind the steady clock by whole hours.
TEST(FakeClock, NowReadsBothClocksAtOneInstantWhileAnotherThreadAdvances) {
  FakeClock clock;
  const ClockReading start = clock.Now();
  const auto offset = start.wall.time_since_epoch() - start.steady.time_since_epoch();
  std::atomic<bool> done{false};
  std::thread advancer([&] {
    for (int i = 0; i < 20000; ++i) clock.Advance(1h);
    done = true;
  });
  int reads = 0;
  while (!done.load() || reads < 1000) {
    const ClockReading now = clock.Now();
    ASSERT_EQ(now.wall.time_since_epoch() - now.steady.time_since_epoch(), offset) << "read " << reads;
    ++reads;
  }
  advancer.join();
}

// A clock whose reads are scripted: the steady clock jumps 10 ms between the first two reads (a preemption),
// then stands still.
class PreemptedClock final : public Clock {
 public:
  WallTime WallNow() const override { return WallTime{} + std::chrono::seconds(++wall_reads_); }
  SteadyTime SteadyNow() const override { return SteadyTime{} + (steady_reads_++ == 0 ? 0ms : 10ms); }
  WakeReason WaitUntil(SteadyTime, std::stop_token, WakeSignal*) override { return WakeReason::kDeadline; }

  mutable int wall_reads_ = 0;
  mutable int steady_reads_ = 0;
};

TEST(Clock, NowReadsAgainWhenTheSteadyReadsAroundTheWallReadLieApart) {
  PreemptedClock clock;
  const ClockReading now = clock.Now();
  EXPECT_EQ(clock.wall_reads_, 2);  // the first pair straddled 10 ms and was read again
  EXPECT_EQ(now.wall, WallTime{} + 2s);
  EXPECT_EQ(now.steady, SteadyTime{} + 10ms);
}

}  // namespace
}  // namespace octop
