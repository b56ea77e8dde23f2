// Time cases: every decision uses the database's now, here the FakeClock's override.
#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

bool Ready(TaskStore& store, const std::string& id) {
  auto polled = store.PollTasks({.ids = {id}});
  EXPECT_TRUE(polled.ok()) << polled.status().ToString();
  return polled.ok() && polled->tasks.size() == 1 && polled->tasks[0].ready;
}

TEST_P(StoreConformance, TaskIsDueExactlyAtNextRunStartAt) {
  AddTask("a", AbsoluteTime{t0() + seconds(10)});
  clock_.Advance(seconds(10) - milliseconds(1));
  EXPECT_FALSE(Ready(*store_, "a"));
  EXPECT_FALSE(Claim("a", "early").has_value());
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(Ready(*store_, "a")) << "next_run_start_at <= now";
  const auto run = Claim("a", "on-time");
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(Show(run->started_at), Show(t0() + seconds(10)));
}

TEST_P(StoreConformance, ExpiryFollowsTheDatabaseClock) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t", minutes(30)).has_value());
  clock_.Advance(minutes(29));
  auto swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
  clock_.Advance(minutes(2));
  swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_EQ(*swept, std::vector<std::string>{"a"});
}

// Several runs of a fixed-rate task across a gap: runs on the grid until the gap, then one run at once, then
// on a new grid anchored to that run -- never a burst of missed runs.
TEST_P(StoreConformance, FixedRateScheduleOverManyRunsAndAGap) {
  AddTask("a", AbsoluteTime{t0()});
  const auto period = minutes(10);
  WallTime expected = t0();
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(Claim("a", "t" + std::to_string(run)).has_value()) << "run " << run;
    clock_.Advance(seconds(30));  // the run's duration does not move the grid
    auto released = store_->TryReleaseTask(
        {.id = "a", .ticket = "t" + std::to_string(run), .next_run = FixedRateAfter{period}});
    OCTOP_ASSERT_OK(released);
    ASSERT_TRUE(*released);
    expected += period;
    EXPECT_EQ(Show(Row("a").next_run_start_at), Show(expected));
    clock_.Advance(expected - clock_.WallNow());
  }
  clock_.Advance(hours(5));  // the cluster was down
  const WallTime resumed = clock_.WallNow();
  ASSERT_TRUE(Claim("a", "after-gap").has_value());
  auto released =
      store_->TryReleaseTask({.id = "a", .ticket = "after-gap", .next_run = FixedRateAfter{period}});
  OCTOP_ASSERT_OK(released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(resumed));
  EXPECT_TRUE(Claim("a", "catch-up").has_value()) << "one run right away...";
  released = store_->TryReleaseTask({.id = "a", .ticket = "catch-up", .next_run = FixedRateAfter{period}});
  OCTOP_ASSERT_OK(released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(resumed + period)) << "...then back on the period";
}

TEST_P(StoreConformance, NegativeAndFractionalOffsetsAreExact) {
  AddTask("past", DbNowPlus{-milliseconds(2500)});
  EXPECT_EQ(Show(Row("past").next_run_start_at), Show(t0() - milliseconds(2500)));
  AddTask("soon", DbNowPlus{milliseconds(250)});
  EXPECT_EQ(Show(Row("soon").next_run_start_at), Show(t0() + milliseconds(250)));
  AddTask("far", DbNowPlus{hours(24 * 365)});
  EXPECT_EQ(Show(Row("far").next_run_start_at), Show(t0() + hours(24 * 365)));
}

TEST_P(StoreConformance, AbsoluteTimesRoundTripToTheMillisecond) {
  const WallTime at = t0() + milliseconds(123456);
  AddTask("a", AbsoluteTime{at});
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(at));
}

TEST_P(StoreConformance, TwoNodesAgreeOnTheDatabaseClock) {
  auto other = OpenNode();
  ASSERT_NE(other, nullptr);
  AddTask("a", DbNowPlus{minutes(1)});
  EXPECT_FALSE(Ready(*other, "a"));
  clock_.Advance(minutes(1));
  EXPECT_TRUE(Ready(*other, "a"));
  auto run = other->TryClaimTask({.id = "a", .ticket = "other-node", .timeout = seconds(5)});
  OCTOP_ASSERT_OK(run);
  ASSERT_TRUE(run->has_value());
  EXPECT_EQ(Show((*run)->expires_at), Show(t0() + minutes(1) + seconds(5)));
}

}  // namespace
}  // namespace octop::store::testing
