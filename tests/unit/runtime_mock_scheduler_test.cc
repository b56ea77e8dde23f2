// octop::testing::MockScheduler, with the cases of Backstage's MockSchedulerService.test.ts.
#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include <octop/testing/mock_scheduler.h>

#include "../integration/runtime_test_support.h"

namespace octop {
namespace {

using runtime_testing::CallCounter;
using runtime_testing::Gate;
using runtime_testing::Iso;
using testing::MockScheduler;
using testing::MockSchedulerOptions;

TaskDefinition Task(std::string id, TaskFrequency frequency, TaskFunction fn) {
  TaskDefinition task;
  task.id = std::move(id);
  task.frequency = std::move(frequency);
  task.timeout = Iso("PT1M");
  task.fn = std::move(fn);
  return task;
}

TEST(MockSchedulerTest, ShouldRunATask) {
  MockScheduler scheduler;
  CallCounter calls;
  ASSERT_TRUE(scheduler.ScheduleTask(Task("a", Iso("PT1S"), [&](std::stop_token) { calls.Hit(); })).ok());
  EXPECT_EQ(calls.calls(), 0);
  ASSERT_TRUE(scheduler.TriggerTask("a").ok());
  EXPECT_EQ(calls.calls(), 1);
  EXPECT_EQ(scheduler.TriggerTask("b"), NotFoundError("Task b not found"));
}

TEST(MockSchedulerTest, ShouldRunTasksOnStartup) {
  MockScheduler scheduler;
  CallCounter plain, local, delayed, manual;
  ASSERT_TRUE(scheduler.ScheduleTask(Task("plain", Iso("PT1S"), [&](std::stop_token) { plain.Hit(); })).ok());
  TaskDefinition local_task = Task("local", Iso("PT1S"), [&](std::stop_token) { local.Hit(); });
  local_task.scope = TaskScope::kLocal;
  ASSERT_TRUE(scheduler.ScheduleTask(local_task).ok());
  TaskDefinition delayed_task = Task("delayed", Iso("PT1S"), [&](std::stop_token) { delayed.Hit(); });
  delayed_task.initial_delay = Iso("PT1M");
  ASSERT_TRUE(scheduler.ScheduleTask(delayed_task).ok());
  ASSERT_TRUE(
      scheduler.ScheduleTask(Task("manual", ManualTrigger{}, [&](std::stop_token) { manual.Hit(); })).ok());
  scheduler.Startup();
  EXPECT_EQ(plain.calls(), 1);
  EXPECT_EQ(local.calls(), 1);
  EXPECT_EQ(delayed.calls(), 0);
  EXPECT_EQ(manual.calls(), 0);
}

TEST(MockSchedulerTest, ShouldNotRunTasksOnStartupIfSkipped) {
  MockScheduler scheduler("test", MockSchedulerOptions{.skip_task_run_on_startup = true});
  CallCounter calls;
  ASSERT_TRUE(scheduler.ScheduleTask(Task("plain", Iso("PT1S"), [&](std::stop_token) { calls.Hit(); })).ok());
  scheduler.Startup();
  EXPECT_EQ(calls.calls(), 0);
}

TEST(MockSchedulerTest, ShouldRunAllTasksOnStartupIfConfigured) {
  MockScheduler scheduler("test", MockSchedulerOptions{.include_manual_tasks_on_startup = true,
                                                       .include_initial_delayed_tasks_on_startup = true});
  CallCounter delayed, manual;
  TaskDefinition delayed_task = Task("delayed", Iso("PT1S"), [&](std::stop_token) { delayed.Hit(); });
  delayed_task.initial_delay = Iso("PT1M");
  ASSERT_TRUE(scheduler.ScheduleTask(delayed_task).ok());
  ASSERT_TRUE(
      scheduler.ScheduleTask(Task("manual", ManualTrigger{}, [&](std::stop_token) { manual.Hit(); })).ok());
  scheduler.Startup();
  EXPECT_EQ(delayed.calls(), 1);
  EXPECT_EQ(manual.calls(), 1);
}

TEST(MockSchedulerTest, ShouldWaitForASpecificTaskToComplete) {
  MockScheduler scheduler;
  Gate gate;
  std::atomic<bool> fail{false};
  ASSERT_TRUE(scheduler
                  .ScheduleTask(Task("a", Iso("PT1S"),
                                     [&](std::stop_token stop) {
                                       gate.Wait(stop);
                                       if (fail) throw std::runtime_error("it broke");
                                     }))
                  .ok());
  std::future<Status> first = scheduler.WaitForTask("a");
  std::thread trigger([&] { (void)scheduler.TriggerTask("a"); });
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);  // still running
  gate.Open();
  ASSERT_EQ(first.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(first.get().ok());
  trigger.join();

  fail = true;
  std::future<Status> second = scheduler.WaitForTask("a");
  ASSERT_TRUE(scheduler.TriggerTask("a").ok());
  ASSERT_EQ(second.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(second.get(), InternalError("it broke"));
  EXPECT_EQ(scheduler.WaitForTask("missing").get().code(), StatusCode::kNotFound);
}

TEST(MockSchedulerTest, ShouldCancelARunningTaskAndAllowReTriggeringWithAFreshSignal) {
  MockScheduler scheduler;
  Gate first;
  std::atomic<int> run{0};
  std::atomic<bool> second_saw_stop{true};
  ASSERT_TRUE(scheduler
                  .ScheduleTask(Task("a", Iso("PT1S"),
                                     [&](std::stop_token stop) {
                                       if (++run == 1) {
                                         first.Wait(stop);
                                       } else {
                                         second_saw_stop = stop.stop_requested();
                                       }
                                     }))
                  .ok());
  EXPECT_EQ(scheduler.CancelTask("a"), ConflictError("Task a is not running"));
  std::thread trigger([&] { (void)scheduler.TriggerTask("a"); });
  ASSERT_TRUE(runtime_testing::Eventually([&] { return run.load() == 1; }));
  ASSERT_TRUE(runtime_testing::Eventually([&] { return scheduler.CancelTask("a").ok(); }));
  trigger.join();
  EXPECT_TRUE(first.stop_observed());
  ASSERT_TRUE(scheduler.TriggerTask("a").ok());
  EXPECT_EQ(run.load(), 2);
  EXPECT_FALSE(second_saw_stop.load());
}

TEST(MockSchedulerTest, ShouldAbortTasksWhenShuttingDown) {
  MockScheduler scheduler;
  Gate gate;
  std::atomic<bool> entered{false};
  ASSERT_TRUE(scheduler
                  .ScheduleTask(Task("a", Iso("PT1S"),
                                     [&](std::stop_token stop) {
                                       entered = true;
                                       gate.Wait(stop);
                                     }))
                  .ok());
  std::thread trigger([&] { (void)scheduler.TriggerTask("a"); });
  ASSERT_TRUE(runtime_testing::Eventually([&] { return entered.load(); }));
  ASSERT_TRUE(runtime_testing::Eventually([&] {
    auto states = scheduler.GetTaskStates();
    return states.ok() && (*states)[0].worker_state == WorkerStatus::kRunning;
  }));
  scheduler.Shutdown();
  trigger.join();
  EXPECT_TRUE(gate.stop_observed());
}

TEST(MockSchedulerTest, DescribesScheduledTasks) {
  MockScheduler scheduler;
  ASSERT_TRUE(scheduler.ScheduleTask(Task("a", Iso("PT5S"), [](std::stop_token) {})).ok());
  std::vector<TaskDescriptor> tasks = scheduler.GetScheduledTasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].id, "a");
  EXPECT_EQ(tasks[0].scope, TaskScope::kGlobal);
  EXPECT_EQ(tasks[0].settings.cadence, "PT5S");
}

}  // namespace
}  // namespace octop
