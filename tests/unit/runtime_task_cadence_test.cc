// TaskCadence's release rule: a cron run moves the task past the occurrence it served, whether its due time
// was written as the occurrence (octop) or a second before it (Backstage), and however early it ended
// (docs/scheduler.md, "One run per occurrence").
#include <gtest/gtest.h>

#include <octop/task_settings.h>

#include "runtime/task_cadence.h"

namespace octop::runtime {
namespace {

using namespace std::chrono_literals;

WallTime Utc(int h, int m, int s) {
  // 2026-06-01 (no DST question in UTC).
  return WallTime{} + std::chrono::sys_days(std::chrono::year(2026) / 6 / 1).time_since_epoch() +
         std::chrono::hours(h) + std::chrono::minutes(m) + std::chrono::seconds(s);
}

TaskCadence Cron(std::string expression) {
  TaskSettingsV2 settings;
  settings.cadence = std::move(expression);
  settings.timeout_after_duration = "PT1M";
  settings.time_zone = "UTC";
  Result<TaskCadence> cadence = TaskCadence::FromSettings(settings);
  EXPECT_TRUE(cadence.ok()) << cadence.status().ToString();
  return *cadence;
}

WallTime NextAt(const TaskCadence& cadence, WallTime db_now, std::optional<WallTime> due_at) {
  Result<store::TimeSpec> next = cadence.NextRunAfterRun(db_now, due_at);
  EXPECT_TRUE(next.ok());
  EXPECT_TRUE(std::holds_alternative<store::AbsoluteTime>(*next));
  return std::get<store::AbsoluteTime>(*next).at;
}

TEST(TaskCadenceTest, TheSettingsDstPolicyDecidesASkippedTime) {
  TaskSettingsV2 settings;
  settings.cadence = "30 2 * * *";
  settings.timeout_after_duration = "PT1M";
  settings.time_zone = "America/New_York";
  // 2026-03-08: 02:30 does not exist in New York.
  const WallTime before = WallTime{} +
                          std::chrono::sys_days(std::chrono::year(2026) / 3 / 7).time_since_epoch() +
                          std::chrono::hours(12);
  const WallTime shifted = WallTime{} +
                           std::chrono::sys_days(std::chrono::year(2026) / 3 / 8).time_since_epoch() +
                           std::chrono::hours(7);  // 03:00 EDT
  const WallTime next_day = WallTime{} +
                            std::chrono::sys_days(std::chrono::year(2026) / 3 / 9).time_since_epoch() +
                            std::chrono::hours(6) + std::chrono::minutes(30);  // 02:30 EDT
  settings.dst_policy = "skip,once";
  Result<TaskCadence> skip = TaskCadence::FromSettings(settings);
  ASSERT_TRUE(skip.ok()) << skip.status().ToString();
  EXPECT_EQ(skip->NextCronAfter(before).value(), next_day);
  settings.dst_policy = "shift,once";
  EXPECT_EQ(TaskCadence::FromSettings(settings)->NextCronAfter(before).value(), shifted);
  settings.dst_policy.reset();  // the package's walk runs a skipped time at the end of the gap too
  EXPECT_EQ(TaskCadence::FromSettings(settings)->NextCronAfter(before).value(), shifted);
}

TEST(TaskCadenceTest, ARunDueASecondEarlyServesTheOccurrenceAfterIt) {
  const TaskCadence hourly = Cron("0 * * * *");
  // Claimed at 10:59:59 (Backstage's registration), ended at once: the next run is 12:00, not 11:00.
  EXPECT_EQ(hourly.ServedOccurrence(Utc(10, 59, 59)), Utc(11, 0, 0));
  EXPECT_EQ(NextAt(hourly, Utc(10, 59, 59) + 20ms, Utc(10, 59, 59)), Utc(12, 0, 0));
  // Due on the occurrence itself (octop's registration and releases).
  EXPECT_EQ(hourly.ServedOccurrence(Utc(11, 0, 0)), Utc(11, 0, 0));
  EXPECT_EQ(NextAt(hourly, Utc(11, 0, 0) + 20ms, Utc(11, 0, 0)), Utc(12, 0, 0));
}

TEST(TaskCadenceTest, ATriggeredRunLeavesTheNextOccurrenceDue) {
  const TaskCadence hourly = Cron("0 * * * *");
  // A trigger at 10:30 made the row due then: that run serves no occurrence, 11:00 still runs.
  EXPECT_EQ(hourly.ServedOccurrence(Utc(10, 30, 0) + 400ms), std::nullopt);
  EXPECT_EQ(NextAt(hourly, Utc(10, 30, 5), Utc(10, 30, 0) + 400ms), Utc(11, 0, 0));
  // Without a known due time the rule is the plain one: the first occurrence after now.
  EXPECT_EQ(NextAt(hourly, Utc(10, 30, 5), std::nullopt), Utc(11, 0, 0));
}

TEST(TaskCadenceTest, ALongRunSkipsTheOccurrencesItOverlapped) {
  const TaskCadence every_minute = Cron("* * * * *");
  // Claimed for 10:00, ended at 10:02:30: the next run is the first occurrence after the end.
  EXPECT_EQ(NextAt(every_minute, Utc(10, 2, 30), Utc(10, 0, 0)), Utc(10, 3, 0));
}

TEST(TaskCadenceTest, EverySecondCronsKeepTheirPace) {
  const TaskCadence every_second = Cron("* * * * * *");
  // Backstage's "due at once" registration: 10:00:00 serves 10:00:00 and the next run is 10:00:01.
  EXPECT_EQ(every_second.ServedOccurrence(Utc(10, 0, 0)), Utc(10, 0, 0));
  EXPECT_EQ(NextAt(every_second, Utc(10, 0, 0) + 5ms, Utc(10, 0, 0)), Utc(10, 0, 1));
}

}  // namespace
}  // namespace octop::runtime
