// Building TaskSettingsV2 from a schedule (Backstage's parseDuration) and the validation
// done by ScheduleTask before anything is registered (Backstage's validateId).
#include <memory>

#include <gtest/gtest.h>

#include <octop/scheduler.h>
#include <octop/testing/fake_clock.h>

#include "../integration/runtime_test_support.h"
#include "runtime/scheduler_opener.h"
#include "store/store.h"

namespace octop {
namespace {

using runtime_testing::Iso;
using runtime_testing::Ms;

TaskScheduleDefinition Schedule(TaskFrequency frequency) {
  TaskScheduleDefinition schedule;
  schedule.frequency = std::move(frequency);
  schedule.timeout = Iso("PT1M");
  return schedule;
}

std::string CadenceOf(TaskFrequency frequency) {
  Result<TaskSettingsV2> settings = TaskSettingsFromSchedule(Schedule(std::move(frequency)));
  EXPECT_TRUE(settings.ok()) << settings.status().ToString();
  return settings.ok() ? settings->cadence : "";
}

TEST(TaskSettingsFromScheduleTest, ShouldParseDurations) {
  HumanDuration five_seconds;
  five_seconds.milliseconds = 5000;
  EXPECT_EQ(CadenceOf(Duration::FromHuman(five_seconds).value()), "PT5S");
  EXPECT_EQ(CadenceOf(Duration::FromMilliseconds(5000)), "PT5S");
  EXPECT_EQ(CadenceOf(CronFrequency{"1 * * * *", std::nullopt}), "1 * * * *");
  EXPECT_EQ(CadenceOf(ManualTrigger{}), "manual");
  HumanDuration ninety_minutes;
  ninety_minutes.minutes = 90;
  EXPECT_EQ(CadenceOf(Duration::FromHuman(ninety_minutes).value()), "PT90M");
}

TEST(TaskSettingsFromScheduleTest, BuildsTheBackstageJson) {
  TaskScheduleDefinition schedule = Schedule(Iso("PT10S"));
  schedule.initial_delay = Iso("PT10S");
  Result<TaskSettingsV2> settings = TaskSettingsFromSchedule(schedule);
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(
      settings->ToJson(),
      R"({"version":2,"cadence":"PT10S","initialDelayDuration":"PT10S","timeoutAfterDuration":"PT1M"})");
}

TEST(TaskSettingsFromScheduleTest, StoresTheCronTimeZone) {
  Result<TaskSettingsV2> settings =
      TaskSettingsFromSchedule(Schedule(CronFrequency{"0 2 * * *", "Europe/Paris"}));
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->time_zone, "Europe/Paris");
  EXPECT_NE(settings->ToJson().find(R"("timeZone":"Europe/Paris")"), std::string::npos);
}

TEST(TaskSettingsFromScheduleTest, StoresAWallClockDstPolicyAndLeavesTheDefaultOut) {
  Result<TaskSettingsV2> settings = TaskSettingsFromSchedule(
      Schedule(CronFrequency{"30 2 * * *", "America/New_York", DstPolicy::Parse("shift,twice").value()}));
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->dst_policy, "shift,twice");
  settings = TaskSettingsFromSchedule(Schedule(CronFrequency{"30 2 * * *", std::nullopt, DstPolicy{}}));
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->dst_policy, std::nullopt);
  EXPECT_EQ(settings->ToJson().find("dstPolicy"), std::string::npos);
}

TEST(TaskSettingsFromScheduleTest, RejectsInvalidSchedules) {
  EXPECT_EQ(TaskSettingsFromSchedule(Schedule(CronFrequency{"61 * * * *", std::nullopt})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskSettingsFromSchedule(Schedule(CronFrequency{"not a cron", std::nullopt})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskSettingsFromSchedule(Schedule(CronFrequency{"* * * * *", "Mars/Olympus"})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskSettingsFromSchedule(Schedule(Duration())).status().code(), StatusCode::kInvalidArgument);
  TaskScheduleDefinition zero_timeout = Schedule(Iso("PT1M"));
  zero_timeout.timeout = Duration();
  EXPECT_EQ(TaskSettingsFromSchedule(zero_timeout).status().code(), StatusCode::kInvalidArgument);
}

class ScheduleTaskValidationTest : public ::testing::Test {
 protected:
  ScheduleTaskValidationTest() {
    SchedulerOptions options;
    options.clock = &clock_;
    options.logger = [](LogLevel, std::string_view) {};
    runtime::StoreFactory stores = [](const std::string&,
                                      const Clock&) -> Result<std::unique_ptr<store::TaskStore>> {
      return UnavailableError("no database in this test");
    };
    scheduler_ = runtime::SchedulerOpener::Create(options, stores);
  }
  Status ScheduleLocal(std::string id) {
    TaskDefinition task;
    task.id = std::move(id);
    task.frequency = ManualTrigger{};
    task.timeout = Iso("PT1M");
    task.scope = TaskScope::kLocal;
    task.fn = [](std::stop_token) {};
    return scheduler_->ForPlugin("test").ScheduleTask(task);
  }
  testing::FakeClock clock_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(ScheduleTaskValidationTest, AcceptsValidIds) {
  for (const char* id : {"a", "a_b", "ab123c_2", "a!", "A", "a-b", "a.b", "_a", "a_"}) {
    EXPECT_TRUE(ScheduleLocal(id).ok()) << id;
  }
}

TEST_F(ScheduleTaskValidationTest, RejectsInvalidIds) {
  Status empty = ScheduleLocal("");
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("is not a valid ID, expected non-empty string"), std::string::npos);
  EXPECT_EQ(ScheduleLocal("   ").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ScheduleLocal(std::string(256, 'x')).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduler_->ForPlugin("test").GetScheduledTasks().empty());
}

TEST_F(ScheduleTaskValidationTest, AGlobalTaskFailsToPersistWhenTheDatabaseIsDown) {
  TaskDefinition task;
  task.id = "global1";
  task.frequency = Iso("PT1M");
  task.timeout = Iso("PT1M");
  task.fn = [](std::stop_token) {};
  Status status = scheduler_->ForPlugin("test").ScheduleTask(task);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "Failed to persist task, no database in this test");
  EXPECT_TRUE(scheduler_->ForPlugin("test").GetScheduledTasks().empty());
}

TEST_F(ScheduleTaskValidationTest, TheRunnerAppliesItsSchedule) {
  TaskScheduleDefinition schedule = Schedule(Ms(5000));
  schedule.scope = TaskScope::kLocal;
  TaskRunner runner = scheduler_->ForPlugin("test").CreateScheduledTaskRunner(schedule);
  ASSERT_TRUE(runner.Run({"task1", [](std::stop_token) {}, std::nullopt}).ok());
  std::vector<TaskDescriptor> tasks = scheduler_->ForPlugin("test").GetScheduledTasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].id, "task1");
  EXPECT_EQ(tasks[0].scope, TaskScope::kLocal);
  EXPECT_EQ(tasks[0].settings.cadence, "PT5S");
}

}  // namespace
}  // namespace octop
