// Every task operation's happy path and edge cases, with the database's now driven by the fixture's
// FakeClock.
#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// ---- UpsertTask -------------------------------------------------------------------------------------------

TEST_P(StoreConformance, UpsertInsertsARowWithOnlyStartAndSettings) {
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "a",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{seconds(30)},
                                      .next_start_at = DbNowPlus{hours(2)}}));
  const TaskRow row = Row("a");
  EXPECT_EQ(row.settings_json, kDurationSettings);
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0() + seconds(30))) << "start_at is used on insert";
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(Show(row.current_run_started_at), "NULL");
  EXPECT_EQ(Show(row.current_run_expires_at), "NULL");
  EXPECT_EQ(row.last_run_error_json, std::nullopt);
  EXPECT_EQ(Show(row.last_run_ended_at), "NULL");
}

TEST_P(StoreConformance, UpsertReplacesSettingsAndNeverTouchesTheRun) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "ticket-1").has_value());
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "a",
                                      .settings_json = std::string(kCronSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{hours(1)}}));
  const TaskRow row = Row("a");
  EXPECT_EQ(row.settings_json, kCronSettings);
  EXPECT_EQ(row.current_run_ticket, "ticket-1") << "a running task stays claimed";
  EXPECT_EQ(Show(row.current_run_started_at), Show(t0()));
  EXPECT_EQ(Show(row.current_run_expires_at), Show(t0() + minutes(1)));
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0()));
}

TEST_P(StoreConformance, UpsertOnlyMovesNextRunEarlier) {
  AddTask("a", DbNowPlus{minutes(120)});
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "a",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{minutes(60)}}));
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + minutes(60)));
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "a",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{minutes(90)}}));
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + minutes(60))) << "a later time never wins";
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "a",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = AbsoluteTime{t0() + minutes(60)}}));
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + minutes(60))) << "an equal time changes nothing";
}

// A node starting after the run for an occurrence ended must not pull the next run back to that occurrence
// (less Backstage's 1 s): the run it would repeat has happened.
TEST_P(StoreConformance, UpsertDoesNotRewindToAnOccurrenceARunAlreadyServed) {
  const WallTime occurrence = t0() + seconds(10);
  AddTask("cron", AbsoluteTime{occurrence - seconds(1)});
  clock_.Advance(seconds(9));
  ASSERT_TRUE(Claim("cron", "ticket-1").has_value());
  clock_.Advance(milliseconds(500));
  auto released = store_->TryReleaseTask(
      {.id = "cron", .ticket = "ticket-1", .next_run = AbsoluteTime{occurrence + seconds(5)}});
  ASSERT_TRUE(released.ok() && *released);
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "cron",
                                      .settings_json = std::string(kCronSettings),
                                      .start_at = AbsoluteTime{occurrence - seconds(1)},
                                      .next_start_at = AbsoluteTime{occurrence - seconds(1)}}));
  EXPECT_EQ(Show(Row("cron").next_run_start_at), Show(occurrence + seconds(5)));
  // An earlier time than the last run's end still wins (a schedule changed to run sooner).
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "cron",
                                      .settings_json = std::string(kCronSettings),
                                      .start_at = AbsoluteTime{occurrence + seconds(2)},
                                      .next_start_at = AbsoluteTime{occurrence + seconds(2)}}));
  EXPECT_EQ(Show(Row("cron").next_run_start_at), Show(occurrence + seconds(2)));
}

// Backstage's TaskWorker.test.ts, case 7: cron */15 then */2 moves the time; back to */15 keeps the */2 time.
TEST_P(StoreConformance, NextRunIsTheMinimumAcrossCronScheduleChanges) {
  const std::string every15 = R"({"version":2,"cadence":"*/15 * * * *","timeoutAfterDuration":"PT1M"})";
  const std::string every2 = R"({"version":2,"cadence":"*/2 * * * *","timeoutAfterDuration":"PT1M"})";
  // The caller computes cron occurrences (minus 1 s, as Backstage does) and passes them as absolute times.
  const WallTime next15 = t0() + minutes(15) - seconds(1);
  const WallTime next2 = t0() + minutes(2) - seconds(1);
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "cron",
                                      .settings_json = every15,
                                      .start_at = AbsoluteTime{next15},
                                      .next_start_at = AbsoluteTime{next15}}));
  EXPECT_EQ(Show(Row("cron").next_run_start_at), Show(next15));
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "cron",
                                      .settings_json = every2,
                                      .start_at = AbsoluteTime{next2},
                                      .next_start_at = AbsoluteTime{next2}}));
  EXPECT_EQ(Show(Row("cron").next_run_start_at), Show(next2));
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "cron",
                                      .settings_json = every15,
                                      .start_at = AbsoluteTime{next15},
                                      .next_start_at = AbsoluteTime{next15}}));
  const TaskRow row = Row("cron");
  EXPECT_EQ(Show(row.next_run_start_at), Show(next2));
  EXPECT_EQ(row.settings_json, every15);
}

// Backstage's TaskWorker.test.ts, case 8: PT120M run once (next = now + 120 m), then PT60M pulls it in to now
// + 60 m; repeating changes nothing.
TEST_P(StoreConformance, NextRunIsTheMinimumAcrossHumanDurationChanges) {
  const std::string pt120 = R"({"version":2,"cadence":"PT120M","timeoutAfterDuration":"PT1M"})";
  const std::string pt60 = R"({"version":2,"cadence":"PT60M","timeoutAfterDuration":"PT1M"})";
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "d",
                                      .settings_json = pt120,
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{minutes(120)}}));
  ASSERT_TRUE(Claim("d", "t").has_value());
  auto released =
      store_->TryReleaseTask({.id = "d", .ticket = "t", .next_run = FixedRateAfter{minutes(120)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(120)));
  OCTOP_ASSERT_OK(store_->UpsertTask(
      {.id = "d", .settings_json = pt60, .start_at = DbNowPlus{}, .next_start_at = DbNowPlus{minutes(60)}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(60)));
  OCTOP_ASSERT_OK(store_->UpsertTask(
      {.id = "d", .settings_json = pt60, .start_at = DbNowPlus{}, .next_start_at = DbNowPlus{minutes(60)}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(60)));
}

// Backstage's TaskWorker.test.ts, case 9: the same with an initial delay of PT2M: after the first run the
// time is about now + 122 m.
TEST_P(StoreConformance, NextRunIsTheMinimumAcrossChangesWithAnInitialDelay) {
  const std::string pt120 =
      R"({"version":2,"cadence":"PT120M","initialDelayDuration":"PT2M","timeoutAfterDuration":"PT1M"})";
  const std::string pt60 =
      R"({"version":2,"cadence":"PT60M","initialDelayDuration":"PT2M","timeoutAfterDuration":"PT1M"})";
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "d",
                                      .settings_json = pt120,
                                      .start_at = DbNowPlus{minutes(2)},
                                      .next_start_at = DbNowPlus{minutes(120)}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(2)));
  EXPECT_FALSE(Claim("d", "early").has_value()) << "not due during the initial delay";
  clock_.Advance(minutes(2));
  ASSERT_TRUE(Claim("d", "t").has_value());
  auto released =
      store_->TryReleaseTask({.id = "d", .ticket = "t", .next_run = FixedRateAfter{minutes(120)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(122)));
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "d",
                                      .settings_json = pt60,
                                      .start_at = DbNowPlus{minutes(2)},
                                      .next_start_at = DbNowPlus{minutes(60)}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(62)));
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "d",
                                      .settings_json = pt60,
                                      .start_at = DbNowPlus{minutes(2)},
                                      .next_start_at = DbNowPlus{minutes(60)}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(62)));
}

// Backstage's TaskWorker.test.ts, case 10: a manual task's next run stays NULL through a trigger, a claim and
// a release.
TEST_P(StoreConformance, ManualTaskNextRunStaysNull) {
  AddTask("m", NullTime{}, kManualSettings);
  EXPECT_EQ(Show(Row("m").next_run_start_at), "NULL");
  EXPECT_FALSE(Claim("m", "t").has_value()) << "a NULL next run is never due";
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "m"}));
  ASSERT_TRUE(Claim("m", "t").has_value());
  auto released = store_->TryReleaseTask({.id = "m", .ticket = "t", .next_run = NullTime{}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("m").next_run_start_at), "NULL");
  AddTask("m", NullTime{}, kManualSettings);
  EXPECT_EQ(Show(Row("m").next_run_start_at), "NULL");
}

// The documented fix of Backstage's quirk: a task switched from manual to a timed cadence starts running.
TEST_P(StoreConformance, SwitchingFromManualToTimedSetsTheNextRun) {
  AddTask("m", NullTime{}, kManualSettings);
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "m",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{minutes(10)}}));
  EXPECT_EQ(Show(Row("m").next_run_start_at), Show(t0() + minutes(10)));
}

TEST_P(StoreConformance, SwitchingFromTimedToManualKeepsTheStoredTime) {
  AddTask("t", DbNowPlus{minutes(10)});
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "t",
                                      .settings_json = std::string(kManualSettings),
                                      .start_at = NullTime{},
                                      .next_start_at = NullTime{}}));
  const TaskRow row = Row("t");
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0() + minutes(10)));
  EXPECT_EQ(row.settings_json, kManualSettings);
}

// ---- PollTasks --------------------------------------------------------------------------------------------

TEST_P(StoreConformance, PollReportsReadyRunningAndLeavesOutMissingIds) {
  AddTask("due", DbNowPlus{});
  AddTask("later", DbNowPlus{minutes(5)});
  AddTask("running", DbNowPlus{});
  AddTask("manual", NullTime{}, kManualSettings);
  ASSERT_TRUE(Claim("running", "t").has_value());
  auto polled = store_->PollTasks({.ids = {"due", "later", "running", "manual", "missing"}});
  OCTOP_ASSERT_OK(polled);
  EXPECT_EQ(Show(polled->db_now), Show(t0()));
  ASSERT_EQ(polled->tasks.size(), 4u);
  std::map<std::string, PolledTask> by_id;
  for (const PolledTask& t : polled->tasks) by_id[t.id] = t;
  EXPECT_TRUE(by_id.at("due").ready);
  EXPECT_FALSE(by_id.at("due").running);
  EXPECT_EQ(by_id.at("due").settings_json, kDurationSettings);
  EXPECT_FALSE(by_id.at("later").ready);
  EXPECT_EQ(Show(by_id.at("later").next_run_start_at), Show(t0() + minutes(5)));
  EXPECT_FALSE(by_id.at("running").ready);
  EXPECT_TRUE(by_id.at("running").running);
  EXPECT_EQ(Show(by_id.at("running").current_run_expires_at), Show(t0() + minutes(1)));
  EXPECT_FALSE(by_id.at("manual").ready);
  EXPECT_EQ(by_id.count("missing"), 0u);
}

TEST_P(StoreConformance, PollWithNoIdsStillReportsDatabaseNow) {
  clock_.Advance(seconds(42));
  auto polled = store_->PollTasks({});
  OCTOP_ASSERT_OK(polled);
  EXPECT_TRUE(polled->tasks.empty());
  EXPECT_EQ(Show(polled->db_now), Show(t0() + seconds(42)));
}

TEST_P(StoreConformance, PollThousandsOfIdsInOneCall) {
  constexpr int kTasks = 1500;
  std::vector<std::string> ids;
  for (int i = 0; i < kTasks; ++i) {
    ids.push_back("task-" + std::to_string(i));
    AddTask(ids.back(), i % 2 == 0 ? TimeSpec{DbNowPlus{}} : TimeSpec{DbNowPlus{hours(1)}});
  }
  for (int i = 0; i < 2000; ++i) ids.push_back("missing-" + std::to_string(i));
  auto polled = store_->PollTasks({.ids = ids});
  OCTOP_ASSERT_OK(polled);
  ASSERT_EQ(polled->tasks.size(), static_cast<std::size_t>(kTasks));
  int ready = 0;
  for (const PolledTask& t : polled->tasks) ready += t.ready ? 1 : 0;
  EXPECT_EQ(ready, kTasks / 2);
}

// ---- TryClaimTask and CheckTaskTicket ---------------------------------------------------------------------

TEST_P(StoreConformance, ClaimSetsTicketStartAndExpiry) {
  AddTask("a", DbNowPlus{});
  clock_.Advance(seconds(3));
  const auto run = Claim("a", "ticket-1", seconds(90));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(Show(run->started_at), Show(t0() + seconds(3)));
  EXPECT_EQ(Show(run->expires_at), Show(t0() + seconds(93)));
  const TaskRow row = Row("a");
  EXPECT_EQ(row.current_run_ticket, "ticket-1");
  EXPECT_EQ(Show(row.current_run_started_at), Show(t0() + seconds(3)));
  EXPECT_EQ(Show(row.current_run_expires_at), Show(t0() + seconds(93)));
}

TEST_P(StoreConformance, ClaimWithoutTimeoutHasNoExpiry) {
  AddTask("a", DbNowPlus{});
  const auto run = Claim("a", "t", std::nullopt);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(Show(run->expires_at), "NULL");
  EXPECT_EQ(Show(Row("a").current_run_expires_at), "NULL");
}

TEST_P(StoreConformance, ClaimIsExclusive) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "first").has_value());
  EXPECT_FALSE(Claim("a", "second").has_value());
  EXPECT_EQ(Row("a").current_run_ticket, "first");
}

TEST_P(StoreConformance, ClaimFailsWhenNotDueOrMissing) {
  AddTask("later", DbNowPlus{minutes(1)});
  EXPECT_FALSE(Claim("later", "t").has_value());
  EXPECT_EQ(Row("later").current_run_ticket, std::nullopt);
  EXPECT_FALSE(Claim("missing", "t").has_value());
}

TEST_P(StoreConformance, ACheckThatExtendsTheLeaseOnlyEverLengthensItForItsOwner) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "mine").has_value());  // expires at t0 + 1 min
  auto other = store_->CheckTaskTicket({.id = "a", .ticket = "other", .extend_lease = minutes(5)});
  OCTOP_ASSERT_OK(other);
  EXPECT_FALSE(*other);
  EXPECT_EQ(Show(Row("a").current_run_expires_at), Show(t0() + minutes(1)));
  auto shorter = store_->CheckTaskTicket({.id = "a", .ticket = "mine", .extend_lease = seconds(5)});
  OCTOP_ASSERT_OK(shorter);
  EXPECT_TRUE(*shorter);
  EXPECT_EQ(Show(Row("a").current_run_expires_at), Show(t0() + minutes(1)));
  clock_.Advance(seconds(58));
  auto longer = store_->CheckTaskTicket({.id = "a", .ticket = "mine", .extend_lease = seconds(5)});
  OCTOP_ASSERT_OK(longer);
  EXPECT_TRUE(*longer);
  EXPECT_EQ(Show(Row("a").current_run_expires_at), Show(t0() + seconds(63)));
}

TEST_P(StoreConformance, CheckTicketIsTrueOnlyForTheCurrentOwner) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "mine").has_value());
  auto mine = store_->CheckTaskTicket({.id = "a", .ticket = "mine"});
  OCTOP_ASSERT_OK(mine);
  EXPECT_TRUE(*mine);
  auto other = store_->CheckTaskTicket({.id = "a", .ticket = "other"});
  OCTOP_ASSERT_OK(other);
  EXPECT_FALSE(*other);
  auto missing = store_->CheckTaskTicket({.id = "missing", .ticket = "mine"});
  OCTOP_ASSERT_OK(missing);
  EXPECT_FALSE(*missing);
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "mine", .next_run = DbNowPlus{}});
  OCTOP_ASSERT_OK(released);
  auto after = store_->CheckTaskTicket({.id = "a", .ticket = "mine"});
  OCTOP_ASSERT_OK(after);
  EXPECT_FALSE(*after);
}

// ---- TryReleaseTask ---------------------------------------------------------------------------------------

TEST_P(StoreConformance, ReleaseClearsTheRunAndRecordsTheResult) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t").has_value());
  clock_.Advance(seconds(7));
  const std::string error = R"({"name":"Error","message":"it failed"})";
  auto released = store_->TryReleaseTask(
      {.id = "a", .ticket = "t", .next_run = DbNowPlus{minutes(5)}, .error_json = error});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  TaskRow row = Row("a");
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(Show(row.current_run_started_at), "NULL");
  EXPECT_EQ(Show(row.current_run_expires_at), "NULL");
  EXPECT_EQ(Show(row.last_run_ended_at), Show(t0() + seconds(7)));
  EXPECT_EQ(row.last_run_error_json, error);
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0() + seconds(7) + minutes(5)));

  // A later successful run clears the error.
  clock_.Advance(minutes(5));
  ASSERT_TRUE(Claim("a", "t2").has_value());
  released = store_->TryReleaseTask({.id = "a", .ticket = "t2", .next_run = AbsoluteTime{t0() + hours(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  row = Row("a");
  EXPECT_EQ(row.last_run_error_json, std::nullopt);
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0() + hours(1)));
}

// Backstage's TaskWorker.test.ts, case 4: after the run was taken over, the old owner can neither release nor
// pass the liveness check.
TEST_P(StoreConformance, StolenTicketCannotReleaseOrCheck) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "ticket").has_value());
  OCTOP_ASSERT_OK(store_->CancelTask({.id = "a", .error_json = std::string(kCancelledError)}));
  clock_.Advance(seconds(1));
  ASSERT_TRUE(Claim("a", "stolen").has_value());
  const TaskRow before = Row("a");
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "ticket", .next_run = DbNowPlus{hours(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_FALSE(*released);
  auto check = store_->CheckTaskTicket({.id = "a", .ticket = "ticket"});
  OCTOP_ASSERT_OK(check);
  EXPECT_FALSE(*check);
  const TaskRow after = Row("a");
  EXPECT_EQ(after.current_run_ticket, "stolen");
  EXPECT_EQ(Show(after.current_run_started_at), Show(before.current_run_started_at));
  EXPECT_EQ(Show(after.current_run_expires_at), Show(before.current_run_expires_at));
  EXPECT_EQ(Show(after.next_run_start_at), Show(before.next_run_start_at));
}

// Backstage's TaskWorker.test.ts, case 5: a row deleted under a worker: claim, check and release all report
// failure without an error.
TEST_P(StoreConformance, DisappearedRowFailsClaimCheckAndRelease) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t").has_value());
  OCTOP_ASSERT_OK(admin().DeleteTask("a"));
  EXPECT_FALSE(Claim("a", "t2").has_value());
  auto check = store_->CheckTaskTicket({.id = "a", .ticket = "t"});
  OCTOP_ASSERT_OK(check);
  EXPECT_FALSE(*check);
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = DbNowPlus{}});
  OCTOP_ASSERT_OK(released);
  EXPECT_FALSE(*released);
  auto polled = store_->PollTasks({.ids = {"a"}});
  OCTOP_ASSERT_OK(polled);
  EXPECT_TRUE(polled->tasks.empty());
}

TEST_P(StoreConformance, FixedRateIsAnchoredToThePlannedStart) {
  AddTask("a", DbNowPlus{});
  clock_.Advance(seconds(20));  // the run starts late and takes a while
  ASSERT_TRUE(Claim("a", "t").has_value());
  clock_.Advance(seconds(15));
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = FixedRateAfter{minutes(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + minutes(1))) << "previous start + period";
}

TEST_P(StoreConformance, FixedRateHasNoCatchUpAfterALongGap) {
  AddTask("a", DbNowPlus{});
  clock_.Advance(hours(10));
  ASSERT_TRUE(Claim("a", "t").has_value());
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = FixedRateAfter{minutes(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + hours(10)))
      << "clamped to now, not 599 runs behind";
}

TEST_P(StoreConformance, FixedRateIsNeverMoreThanAPeriodFromNow) {
  // The wall clock steps back two hours during a run: previous start + period lies two hours ahead, and the
  // task would wait that long. The release bounds it by one period from now (docs/reliability.md).
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t").has_value());
  clock_.StepWall(-hours(2));
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = FixedRateAfter{minutes(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() - hours(2) + minutes(1)));
}

TEST_P(StoreConformance, CapTaskNextRunBringsAFarDueTimeWithinTheBound) {
  AddTask("far", AbsoluteTime{t0() + hours(2)});
  AddTask("near", AbsoluteTime{t0() + seconds(30)});
  auto moved = store_->CapTaskNextRun({.id = "far", .within = minutes(1)});
  OCTOP_ASSERT_OK(moved);
  EXPECT_TRUE(*moved);
  EXPECT_EQ(Show(Row("far").next_run_start_at), Show(t0() + minutes(1)));
  moved = store_->CapTaskNextRun({.id = "far", .within = minutes(1)});
  OCTOP_ASSERT_OK(moved);
  EXPECT_FALSE(*moved) << "already within the bound";
  moved = store_->CapTaskNextRun({.id = "near", .within = minutes(1)});
  OCTOP_ASSERT_OK(moved);
  EXPECT_FALSE(*moved);
  EXPECT_EQ(Show(Row("near").next_run_start_at), Show(t0() + seconds(30)));
  moved = store_->CapTaskNextRun({.id = "missing", .within = minutes(1)});
  OCTOP_ASSERT_OK(moved);
  EXPECT_FALSE(*moved);
  // A running task is its owner's: its next run is written by the release.
  AddTask("busy", DbNowPlus{});
  ASSERT_TRUE(Claim("busy", "t").has_value());
  clock_.StepWall(-hours(2));
  moved = store_->CapTaskNextRun({.id = "busy", .within = minutes(1)});
  OCTOP_ASSERT_OK(moved);
  EXPECT_FALSE(*moved);
}

TEST_P(StoreConformance, FixedRateWithSubSecondPeriod) {
  AddTask("a", AbsoluteTime{t0()});
  ASSERT_TRUE(Claim("a", "t").has_value());
  auto released =
      store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = FixedRateAfter{milliseconds(100)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + milliseconds(100)));
}

// ---- TriggerTask ------------------------------------------------------------------------------------------

TEST_P(StoreConformance, TriggerMakesATaskDueNow) {
  AddTask("a", DbNowPlus{hours(1)});
  clock_.Advance(seconds(5));
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "a"}));
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + seconds(5)));
  auto polled = store_->PollTasks({.ids = {"a"}});
  OCTOP_ASSERT_OK(polled);
  ASSERT_EQ(polled->tasks.size(), 1u);
  EXPECT_TRUE(polled->tasks[0].ready);
}

TEST_P(StoreConformance, TriggerOfAMissingTaskIsNotFound) {
  const Status s = store_->TriggerTask({.id = "nope"});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Task nope does not exist");
}

TEST_P(StoreConformance, TriggerOfARunningTaskIsConflict) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t").has_value());
  const Status s = store_->TriggerTask({.id = "a"});
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "Task a is currently running");
  EXPECT_EQ(Row("a").current_run_ticket, "t");
}

// ---- CancelTask -------------------------------------------------------------------------------------------

// Backstage's TaskWorker.test.ts, case 11.
TEST_P(StoreConformance, CancelClearsTheRunAndKeepsTheNextRun) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t").has_value());
  clock_.Advance(seconds(2));
  OCTOP_ASSERT_OK(store_->CancelTask({.id = "a", .error_json = std::string(kCancelledError)}));
  const TaskRow row = Row("a");
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(Show(row.current_run_started_at), "NULL");
  EXPECT_EQ(Show(row.current_run_expires_at), "NULL");
  EXPECT_EQ(Show(row.last_run_ended_at), Show(t0() + seconds(2)));
  ASSERT_TRUE(row.last_run_error_json.has_value());
  EXPECT_NE(row.last_run_error_json->find("Task was cancelled"), std::string::npos);
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0()));
  auto released = store_->TryReleaseTask({.id = "a", .ticket = "t", .next_run = DbNowPlus{hours(1)}});
  OCTOP_ASSERT_OK(released);
  EXPECT_FALSE(*released) << "the cancelled run's late release is rejected";
}

// Backstage's TaskWorker.test.ts, cases 12 and 13.
TEST_P(StoreConformance, CancelOfAMissingTaskIsNotFoundAndOfAnIdleTaskConflict) {
  Status s = store_->CancelTask({.id = "nope", .error_json = std::string(kCancelledError)});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Task nope does not exist");
  AddTask("idle", DbNowPlus{});
  s = store_->CancelTask({.id = "idle", .error_json = std::string(kCancelledError)});
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "Task idle is not running");
  EXPECT_EQ(Row("idle").last_run_error_json, std::nullopt);
}

// A cancel may also set the next run (what Backstage's cancel does), so a cancelled manual task is not re-run
// at once.
TEST_P(StoreConformance, CancelWithANullNextRunLeavesAManualTaskUnscheduled) {
  AddTask("m", NullTime{}, kManualSettings);
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "m"}));
  ASSERT_TRUE(Claim("m", "t").has_value());
  OCTOP_ASSERT_OK(store_->CancelTask(
      {.id = "m", .error_json = std::string(kCancelledError), .next_run = TimeSpec{NullTime{}}}));
  const TaskRow row = Row("m");
  EXPECT_EQ(Show(row.next_run_start_at), "NULL");
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(Show(row.last_run_ended_at), Show(t0()));
  clock_.Advance(hours(1));
  EXPECT_FALSE(Claim("m", "again").has_value()) << "not claimable until triggered again";
}

TEST_P(StoreConformance, CancelWithANextRunMovesItLikeARelease) {
  AddTask("d", AbsoluteTime{t0()});
  clock_.Advance(seconds(10));
  ASSERT_TRUE(Claim("d", "t").has_value());
  OCTOP_ASSERT_OK(store_->CancelTask({.id = "d",
                                      .error_json = std::string(kCancelledError),
                                      .next_run = TimeSpec{FixedRateAfter{minutes(1)}}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + minutes(1)));
  EXPECT_FALSE(Claim("d", "again").has_value());

  clock_.Advance(minutes(1));
  ASSERT_TRUE(Claim("d", "t2").has_value());
  OCTOP_ASSERT_OK(store_->CancelTask(
      {.id = "d", .error_json = std::string(kCancelledError), .next_run = TimeSpec{DbNowPlus{minutes(5)}}}));
  EXPECT_EQ(Show(Row("d").next_run_start_at), Show(t0() + seconds(10) + minutes(6)));

  AddTask("idle", AbsoluteTime{t0()});
  const Status s = store_->CancelTask(
      {.id = "idle", .error_json = std::string(kCancelledError), .next_run = TimeSpec{NullTime{}}});
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(Show(Row("idle").next_run_start_at), Show(t0())) << "a failed cancel writes nothing";
}

// ---- SweepExpiredTaskRuns ---------------------------------------------------------------------------------

TEST_P(StoreConformance, JanitorSweepsOnlyExpiredRuns) {
  AddTask("short", DbNowPlus{});
  AddTask("long", DbNowPlus{});
  AddTask("forever", DbNowPlus{});
  ASSERT_TRUE(Claim("short", "t1", seconds(10)).has_value());
  ASSERT_TRUE(Claim("long", "t2", hours(1)).has_value());
  ASSERT_TRUE(Claim("forever", "t3", std::nullopt).has_value());
  clock_.Advance(seconds(11));
  auto swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_EQ(*swept, std::vector<std::string>{"short"});
  const TaskRow row = Row("short");
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(Show(row.current_run_started_at), "NULL");
  EXPECT_EQ(Show(row.current_run_expires_at), "NULL");
  EXPECT_EQ(Show(row.last_run_ended_at), "NULL") << "the janitor writes no result";
  EXPECT_EQ(row.last_run_error_json, std::nullopt);
  EXPECT_EQ(Show(row.next_run_start_at), Show(t0()));
  EXPECT_EQ(Row("long").current_run_ticket, "t2");
  EXPECT_EQ(Row("forever").current_run_ticket, "t3");
  swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
}

TEST_P(StoreConformance, JanitorRecordsTheLostRunWhenGivenAnError) {
  AddTask("lost", DbNowPlus{});
  AddTask("alive", DbNowPlus{});
  ASSERT_TRUE(Claim("lost", "t1", seconds(10)).has_value());
  ASSERT_TRUE(Claim("alive", "t2", hours(1)).has_value());
  clock_.Advance(seconds(11));
  const std::string error = R"({"name":"Error","message":"Task timed out"})";
  auto swept = store_->SweepExpiredTaskRuns({.error_json = error});
  OCTOP_ASSERT_OK(swept);
  EXPECT_EQ(*swept, std::vector<std::string>{"lost"});
  const TaskRow row = Row("lost");
  EXPECT_EQ(row.current_run_ticket, std::nullopt);
  EXPECT_EQ(row.last_run_error_json, error);
  EXPECT_EQ(Show(row.last_run_ended_at), Show(t0() + seconds(11)));
  EXPECT_EQ(Row("alive").last_run_error_json, std::nullopt);
  EXPECT_EQ(Show(Row("alive").last_run_ended_at), "NULL");
}

TEST_P(StoreConformance, JanitorLeavesARunExpiringExactlyNow) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t", seconds(10)).has_value());
  clock_.Advance(seconds(10));
  auto swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty()) << "expires_at < now, strictly";
  clock_.Advance(milliseconds(1));
  swept = store_->SweepExpiredTaskRuns({});
  OCTOP_ASSERT_OK(swept);
  EXPECT_EQ(*swept, std::vector<std::string>{"a"});
  EXPECT_TRUE(Claim("a", "t-next").has_value()) << "the task is claimable again at once";
}

TEST_P(StoreConformance, JanitorTakesTheEarlierOfNowAndExpiredBefore) {
  AddTask("a", DbNowPlus{});
  ASSERT_TRUE(Claim("a", "t", seconds(10)).has_value());
  // The database's clock stepped two hours ahead; the caller's estimate (before the step) is t0 + 1 s.
  clock_.StepWall(hours(2));
  auto swept = store_->SweepExpiredTaskRuns({.expired_before = t0() + seconds(1)});
  OCTOP_ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
  swept = store_->SweepExpiredTaskRuns({.expired_before = t0() + seconds(10) + milliseconds(1)});
  OCTOP_ASSERT_OK(swept);
  EXPECT_EQ(*swept, std::vector<std::string>{"a"});
  // A bound beyond now is no wider than now.
  AddTask("b", DbNowPlus{});
  ASSERT_TRUE(Claim("b", "t2", seconds(10)).has_value());
  swept = store_->SweepExpiredTaskRuns({.expired_before = clock_.WallNow() + hours(5)});
  OCTOP_ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
}

// ---- ListTasks, DeleteTask, DatabaseNow -------------------------------------------------------------------

TEST_P(StoreConformance, ListTasksReturnsAllRowsOrSomeById) {
  AddTask("b", DbNowPlus{});
  AddTask("a", DbNowPlus{minutes(1)});
  AddTask("c", NullTime{}, kManualSettings);
  auto all = store_->ListTasks({});
  OCTOP_ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, "a");
  EXPECT_EQ((*all)[1].id, "b");
  EXPECT_EQ((*all)[2].id, "c");
  auto some = store_->ListTasks({.ids = std::vector<std::string>{"c", "missing", "a"}});
  OCTOP_ASSERT_OK(some);
  ASSERT_EQ(some->size(), 2u);
  EXPECT_EQ((*some)[0].id, "a");
  EXPECT_EQ((*some)[1].id, "c");
  auto none = store_->ListTasks({.ids = std::vector<std::string>{}});
  OCTOP_ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreConformance, DeleteRemovesTheRowAndAMissingOneIsNotFound) {
  AddTask("a", DbNowPlus{});
  OCTOP_ASSERT_OK(admin().DeleteTask("a"));
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
  const Status s = admin().DeleteTask("a");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Task a does not exist");
}

TEST_P(StoreConformance, DatabaseNowFollowsTheClockOverride) {
  auto now = store_->DatabaseNow();
  OCTOP_ASSERT_OK(now);
  EXPECT_EQ(Show(*now), Show(t0()));
  clock_.Advance(milliseconds(1500));
  now = store_->DatabaseNow();
  OCTOP_ASSERT_OK(now);
  EXPECT_EQ(Show(*now), Show(t0() + milliseconds(1500)));
}

TEST_P(StoreConformance, DatabaseNowWithoutOverrideIsTheRealTime) {
  auto real = OpenNode(StoreOptions{}, ns_);
  ASSERT_NE(real, nullptr);
  const WallTime before = std::chrono::system_clock::now();
  auto now = real->DatabaseNow();
  OCTOP_ASSERT_OK(now);
  EXPECT_LT(std::chrono::abs(*now - before), seconds(5)) << Show(*now) << " vs " << Show(before);
  // And its operations use it: a task due a second ago is ready.
  OCTOP_ASSERT_OK(real->UpsertTask({.id = "r",
                                    .settings_json = std::string(kDurationSettings),
                                    .start_at = DbNowPlus{-seconds(1)},
                                    .next_start_at = DbNowPlus{-seconds(1)}}));
  auto polled = real->PollTasks({.ids = {"r"}});
  OCTOP_ASSERT_OK(polled);
  ASSERT_EQ(polled->tasks.size(), 1u);
  EXPECT_TRUE(polled->tasks[0].ready);
}

}  // namespace
}  // namespace octop::store::testing
