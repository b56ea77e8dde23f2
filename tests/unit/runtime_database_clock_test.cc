// DatabaseClock: the node's estimate of the database's clock on its monotonic clock, the steps it reports,
// and the translation of a database instant to the steady clock that the job producer sleeps on
// (docs/reliability.md, "Clock steps").
#include <gtest/gtest.h>

#include <octop/testing/fake_clock.h>

#include "runtime/database_clock.h"

namespace octop::runtime {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

// A fake clock whose database is another server: no DatabaseNowOverride.
class ServerClock final : public Clock {
 public:
  explicit ServerClock(FakeClock& fake) : fake_(fake) {}
  WallTime WallNow() const override { return fake_.WallNow(); }
  SteadyTime SteadyNow() const override { return fake_.SteadyNow(); }
  ClockReading Now() const override { return fake_.Now(); }
  WakeReason WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal) override {
    return fake_.WaitUntil(deadline, std::move(stop), signal);
  }

 private:
  FakeClock& fake_;
};

TEST(DatabaseClock, MeasuresTheServersOffsetAtTheQuerysMidpoint) {
  FakeClock fake;
  ServerClock clock(fake);
  DatabaseClock db(clock);
  const ClockReading before = clock.Now();
  fake.Advance(40ms);  // the query's round trip; the server read its clock half-way, 5 s ahead of this node
  EXPECT_EQ(db.Record(before, before.wall + 20ms + 5s),
            std::nullopt);  // the first reading: nothing to compare
  EXPECT_EQ(db.Now(), clock.WallNow() + 5s);
  // A job due 7 s from the database's now is due 7 s from this node's steady now.
  EXPECT_EQ(db.SteadyAt(clock.WallNow() + 5s + 7s), clock.SteadyNow() + 7s);
}

TEST(DatabaseClock, ReportsTheDatabaseClocksStepsEitherWayButNotTheTimePassing) {
  FakeClock fake;
  ServerClock clock(fake);
  DatabaseClock db(clock);
  const WallTime server_start = fake.WallNow() + 3s;  // the server is 3 s ahead: an offset, not a step
  EXPECT_EQ(db.Record(clock.Now(), server_start), std::nullopt);
  fake.Advance(1h);
  EXPECT_EQ(db.Record(clock.Now(), server_start + 1h), std::nullopt);
  // The node's own wall clock steps: the database's did not, and the estimate does not move.
  fake.StepWall(2h);
  EXPECT_EQ(db.Record(clock.Now(), server_start + 1h), std::nullopt);
  EXPECT_EQ(db.Now(), server_start + 1h);
  // The server's clock steps forward two hours, then back; reported once each, by its size.
  EXPECT_EQ(db.Record(clock.Now(), server_start + 3h), std::chrono::nanoseconds(2h));
  EXPECT_EQ(db.Record(clock.Now(), server_start + 3h), std::nullopt);
  EXPECT_EQ(db.Now(), server_start + 3h);
  EXPECT_EQ(db.Record(clock.Now(), server_start + 1h), std::chrono::nanoseconds(-2h));
  // Below the threshold is a slew's drift, not a step; the estimate follows it.
  EXPECT_EQ(db.Record(clock.Now(), server_start + 1h + DatabaseClock::kStepThreshold - 1ms), std::nullopt);
  EXPECT_EQ(db.Record(clock.Now(), server_start + 1h), std::nullopt);
  EXPECT_EQ(DatabaseClock::Describe(std::chrono::nanoseconds(2h)), "+7200.0 s");
}

TEST(DatabaseClock, AQuerySlowerThanTheThresholdMeasuresNothing) {
  FakeClock fake;
  ServerClock clock(fake);
  DatabaseClock db(clock);
  const ClockReading start = clock.Now();
  EXPECT_EQ(db.Record(start, start.wall), std::nullopt);
  const ClockReading before = clock.Now();
  fake.Advance(DatabaseClock::kStepThreshold + 1ms);
  // Where inside 1 s the server read its clock is unknown: no reading, no step, the estimate stands.
  EXPECT_EQ(db.Record(before, before.wall + 1h), std::nullopt);
  EXPECT_EQ(db.Now(), clock.WallNow());
}

// A fake clock is the database's clock (the stores compare against it): the offset is zero whatever the clock
// did during the query. Measured, a test's Advance during the query would read as an offset, and a job due at
// the instant the test advances to would be slept on past it.
TEST(DatabaseClock, AClockThatOverridesTheDatabasesNowHasNoOffsetToMeasure) {
  FakeClock clock;
  DatabaseClock db(clock);
  const ClockReading before = clock.Now();
  const WallTime db_now = clock.WallNow();
  clock.Advance(2s);  // after the store read its now, before the node read its own
  EXPECT_EQ(db.Record(before, db_now), std::nullopt);
  EXPECT_EQ(db.Now(), clock.WallNow());
  const WallTime due = clock.WallNow() + 2s;
  EXPECT_EQ(db.SteadyAt(due), clock.SteadyNow() + 2s);
  // Its wall clock's step is the database's.
  clock.StepWall(-2h);
  EXPECT_EQ(db.Record(clock.Now(), clock.WallNow()), std::chrono::nanoseconds(-2h));
  EXPECT_EQ(db.Now(), clock.WallNow());
}

}  // namespace
}  // namespace octop::runtime
