// Global tasks on every store backend, driven by a FakeClock that the store also reads as the database's now:
// the cases of Backstage's TaskWorker, PluginTaskSchedulerImpl and janitor tests (docs/scheduler.md).
#include <stdexcept>

#include <gtest/gtest.h>

#include <octop/error_json.h>

#include "scheduler_test_env.h"

namespace octop::runtime_testing {
namespace {

using namespace std::chrono_literals;

class GlobalTaskTest : public SchedulerTestBase {
 protected:
  PluginScheduler& Node(LogCapture* logs = nullptr) { return AddNode(&clock_, logs).ForPlugin(kPlugin); }

  bool WaitWorker(PluginScheduler& plugin, const std::string& id, WorkerStatus status) {
    return Eventually([&] {
      auto e = StateOf(plugin, id);
      return e.has_value() && e->worker_state == status;
    });
  }
  // Idle on this node and released in the database.
  bool WaitReleased(PluginScheduler& plugin, const std::string& id) {
    return Eventually([&] {
      auto e = StateOf(plugin, id);
      return e.has_value() && e->worker_state == WorkerStatus::kIdle && e->task_state.has_value() &&
             e->task_state->status == TaskStatus::kIdle;
    });
  }

  testing::FakeClock clock_;
  const WallTime t0_ = clock_.WallNow();
};

// ---- Backstage's TaskWorker cases -------------------------------------------------------------------------

TEST_P(GlobalTaskTest, GoesThroughTheExpectedStates) {
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  TaskDefinition task =
      Global("task1", CronFrequency{"*/2 * * * * *", "UTC"}, [&](std::stop_token s) { gate.Wait(s); });
  task.initial_delay = Iso("PT3S");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  EXPECT_TRUE(logs_.Contains(LogLevel::kInfo, "Registered scheduled task: test/task1, {\"version\":2"));

  store::TaskStore& db = Direct(clock_);
  auto row = Row(db, "task1");
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->current_run_ticket.has_value());
  EXPECT_FALSE(row->current_run_started_at.has_value());
  EXPECT_FALSE(row->current_run_expires_at.has_value());
  EXPECT_EQ(row->next_run_start_at, t0_ + 3s);
  auto settings = TaskSettingsV2::FromJson(row->settings_json);
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->initial_delay_duration, "PT3S");
  EXPECT_EQ(settings->timeout_after_duration, "PT1M");
  EXPECT_EQ(settings->time_zone, "UTC");

  auto e = StateOf(plugin, "task1");
  ASSERT_TRUE(e.has_value() && e->task_state.has_value());
  EXPECT_EQ(e->task_state->status, TaskStatus::kIdle);
  EXPECT_EQ(e->task_state->starts_at, t0_ + 3s);
  EXPECT_EQ(e->worker_state, WorkerStatus::kInitialWait);
  EXPECT_EQ(e->plugin_id, "test");
  EXPECT_EQ(e->scope, TaskScope::kGlobal);

  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(2s);
  EXPECT_EQ(StateOf(plugin, "task1")->worker_state, WorkerStatus::kInitialWait);
  clock_.Advance(1s);
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  e = StateOf(plugin, "task1");
  EXPECT_EQ(e->task_state->status, TaskStatus::kRunning);
  EXPECT_EQ(e->task_state->started_at, t0_ + 3s);
  EXPECT_EQ(e->task_state->times_out_at, t0_ + 3s + 1min);
  row = Row(db, "task1");
  EXPECT_TRUE(row->current_run_ticket.has_value());
  EXPECT_EQ(row->current_run_expires_at, t0_ + 3s + 1min);

  gate.Open();
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  e = StateOf(plugin, "task1");
  EXPECT_EQ(e->task_state->last_run_ended_at, t0_ + 3s);
  // Backstage releases to 4s, the next even second; octop reads a run due within the second before an
  // occurrence as that occurrence's run (the form Backstage registers cron rows in), so 4s has been served
  // and the next run is 6s (docs/scheduler.md, "One run per occurrence").
  EXPECT_EQ(e->task_state->starts_at, t0_ + 6s);
  EXPECT_FALSE(e->task_state->last_run_error.has_value());
}

TEST_P(GlobalTaskTest, LogsErrorWhenTheTaskThrows) {
  PluginScheduler& plugin = Node(&logs_);
  ASSERT_TRUE(
      plugin
          .ScheduleTask(Global("task1", Iso("PT1H"),
                               [](std::stop_token) { throw std::runtime_error("task failed badly"); }))
          .ok());
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kError, "task failed badly"); }));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  auto e = StateOf(plugin, "task1");
  EXPECT_EQ(e->task_state->last_run_ended_at, t0_);
  ASSERT_TRUE(e->task_state->last_run_error.has_value());
  EXPECT_NE(e->task_state->last_run_error->find("failed"), std::string::npos);
  auto parsed = ParseSerializedError(*e->task_state->last_run_error);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->message, "task failed badly");
  EXPECT_EQ(e->task_state->starts_at, t0_ + 1h);  // fixed rate after the planned start
}

TEST_P(GlobalTaskTest, RunsTasksMoreThanOnceEvenWhenTheTaskThrows) {
  PluginScheduler& plugin = Node(&logs_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", CronFrequency{"* * * * * *", "UTC"},
                                       [&](std::stop_token) {
                                         calls.Hit();
                                         throw std::runtime_error("failed");
                                       }))
                  .ok());
  ASSERT_TRUE(calls.WaitForCalls(1));  // next occurrence minus 1 s: due at once
  for (int i = 2; i <= 3; ++i) {
    ASSERT_TRUE(WaitReleased(plugin, "task1"));
    clock_.Advance(1s);
    ASSERT_TRUE(calls.WaitForCalls(i)) << logs_.Dump();
  }
  EXPECT_GE(calls.calls(), 3);
}

TEST_P(GlobalTaskTest, DoesNotClobberTheTicketLockWhenStolen) {
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  auto& entered = Make<std::atomic<bool>>(false);
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", Iso("PT1H"),
                                       [&](std::stop_token) {
                                         entered = true;
                                         gate.Wait(std::stop_token());  // ignores stop: finishes when told
                                       }))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return entered.load(); }));
  store::TaskStore& db = Direct(clock_);
  // Another node cancels the run and claims it.
  ASSERT_TRUE(db.CancelTask({"task1", SerializeErrorMessage("Task was cancelled")}).ok());
  auto stolen = db.TryClaimTask({"task1", "stolen", 1min});
  ASSERT_TRUE(stolen.ok() && stolen->has_value());
  gate.Open();
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "was no longer owned by this node"); }));
  auto row = Row(db, "task1");
  EXPECT_EQ(row->current_run_ticket, "stolen");
  EXPECT_TRUE(row->current_run_started_at.has_value());
  EXPECT_TRUE(row->current_run_expires_at.has_value());
}

TEST_P(GlobalTaskTest, GracefullyHandlesADisappearedTaskRow) {
  PluginScheduler& plugin = Node(&logs_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(DeleteRow("task1").ok());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(5s);  // the next poll
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kInfo, "No longer able to find task"); }));
  auto e = StateOf(plugin, "task1");
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->task_state.has_value());  // null in the REST API
  EXPECT_EQ(plugin.TriggerTask("task1"), NotFoundError("Task task1 does not exist"));
  EXPECT_EQ(calls.calls(), 0);
}

TEST_P(GlobalTaskTest, RespectsInitialDelayDurationPerWorker) {
  PluginScheduler& node1 = Node();
  CallCounter& calls1 = Make<CallCounter>();
  CallCounter& calls2 = Make<CallCounter>();
  TaskDefinition task1 = Global("task1", Ms(100), [&](std::stop_token) { calls1.Hit(); });
  task1.initial_delay = Ms(300);
  ASSERT_TRUE(node1.ScheduleTask(task1).ok());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(250ms);
  EXPECT_EQ(calls1.calls(), 0);
  clock_.Advance(100ms);  // 350 ms
  ASSERT_TRUE(calls1.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(node1, "task1"));

  PluginScheduler& node2 = Node();
  TaskDefinition task2 = Global("task1", Ms(100), [&](std::stop_token) { calls2.Hit(); });
  task2.initial_delay = Ms(300);
  ASSERT_TRUE(node2.ScheduleTask(task2).ok());
  EXPECT_EQ(StateOf(node2, "task1")->worker_state, WorkerStatus::kInitialWait);
  for (int i = 2; i <= 3; ++i) {  // node 1 keeps running the task while node 2 waits
    ASSERT_TRUE(clock_.WaitForWaiters(2));
    clock_.Advance(100ms);
    ASSERT_TRUE(calls1.WaitForCalls(i));
    ASSERT_TRUE(WaitReleased(node1, "task1"));
  }
  EXPECT_EQ(calls2.calls(), 0);
  EXPECT_EQ(StateOf(node2, "task1")->worker_state, WorkerStatus::kInitialWait);
}

TEST_P(GlobalTaskTest, NextRunStartAtIsAlwaysTheMinBetweenScheduleChangesFromCronFrequency) {
  PluginScheduler& plugin = Node();
  store::TaskStore& db = Direct(clock_);
  auto fn = [](std::stop_token) {};
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", CronFrequency{"*/15 * * * *", "UTC"}, fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 15min - 1s);
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", CronFrequency{"*/2 * * * *", "UTC"}, fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 2min - 1s);
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", CronFrequency{"*/15 * * * *", "UTC"}, fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 2min - 1s);
}

// A row registered the way Backstage does (the occurrence minus one second) is claimed a second early; the
// release then moves past that occurrence instead of onto it, so it runs once (docs/scheduler.md, "One run
// per occurrence").
TEST_P(GlobalTaskTest, ACronRunClaimedASecondEarlyDoesNotRunItsOccurrenceAgain) {
  store::TaskStore& db = Direct(clock_);
  const WallTime occurrence = t0_ + 15min;  // t0_ lies on a quarter hour (see the test above)
  TaskSettingsV2 settings;
  settings.cadence = "*/15 * * * *";
  settings.timeout_after_duration = "PT1M";
  settings.time_zone = "UTC";
  ASSERT_TRUE(db.UpsertTask({"task1", settings.ToJson(), store::AbsoluteTime{occurrence - 1s},
                             store::AbsoluteTime{occurrence - 1s}})
                  .ok());
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", CronFrequency{"*/15 * * * *", "UTC"},
                                       [&](std::stop_token) { calls.Hit(); }))
                  .ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, occurrence - 1s);  // the earlier due time stays
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(15min - 1s);
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, occurrence + 15min);
  EXPECT_EQ(calls.calls(), 1);
}

// A node that starts (or restarts) between two occurrences leaves the next one where the last run put it, and
// that occurrence runs once, on one of the two nodes.
TEST_P(GlobalTaskTest, ANodeStartingBetweenOccurrencesRunsTheNextOneOnce) {
  store::TaskStore& db = Direct(clock_);
  PluginScheduler& node1 = Node();
  CallCounter& calls = Make<CallCounter>();
  auto fn = [&](std::stop_token) { calls.Hit(); };
  ASSERT_TRUE(node1.ScheduleTask(Global("task1", CronFrequency{"*/15 * * * *", "UTC"}, fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 15min - 1s);  // as Backstage registers it
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(15min - 1s);
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(node1, "task1"));
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 30min);

  clock_.Advance(14min);
  PluginScheduler& node2 = Node();
  ASSERT_TRUE(node2.ScheduleTask(Global("task1", CronFrequency{"*/15 * * * *", "UTC"}, fn)).ok());
  // The registration moves the due time a second earlier, and that run still serves 30min only.
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 30min - 1s);
  ASSERT_TRUE(clock_.WaitForWaiters(2));
  clock_.Advance(1min);
  ASSERT_TRUE(calls.WaitForCalls(2));
  ASSERT_TRUE(Eventually([&] {
    auto row = Row(db, "task1");
    return row && !row->current_run_ticket && row->next_run_start_at == t0_ + 45min;
  }));
  EXPECT_EQ(calls.calls(), 2);
}

TEST_P(GlobalTaskTest, NextRunStartAtIsAlwaysTheMinBetweenScheduleChangesWhenUsingHumanDurationFrequency) {
  PluginScheduler& plugin = Node();
  store::TaskStore& db = Direct(clock_);
  CallCounter& calls = Make<CallCounter>();
  auto fn = [&](std::stop_token) { calls.Hit(); };
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT120M"), fn)).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 120min);
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT60M"), fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 60min);
  clock_.Advance(1s);
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT60M"), fn)).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 60min);
}

TEST_P(GlobalTaskTest, NextRunStartAtIsAlwaysTheMinBetweenScheduleChangesWithInitialStartDelay) {
  PluginScheduler& plugin = Node();
  store::TaskStore& db = Direct(clock_);
  CallCounter& calls = Make<CallCounter>();
  auto fn = [&](std::stop_token) { calls.Hit(); };
  TaskDefinition task = Global("task1", Iso("PT120M"), fn);
  task.initial_delay = Iso("PT2M");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 2min);
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(2min);
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 122min);
  task.frequency = Iso("PT60M");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 62min);
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 62min);
}

TEST_P(GlobalTaskTest, NextRunStartAtIsNotSetForManuallyTriggeredTasks) {
  PluginScheduler& plugin = Node();
  store::TaskStore& db = Direct(clock_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  EXPECT_FALSE(Row(db, "task1")->next_run_start_at.has_value());
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  auto row = Row(db, "task1");
  EXPECT_FALSE(row->next_run_start_at.has_value());
  EXPECT_EQ(row->last_run_ended_at, t0_);
}

TEST_P(GlobalTaskTest, SwitchingFromManualToATimedCadenceStartsRunning) {
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  auto fn = [&](std::stop_token) { calls.Hit(); };
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", ManualTrigger{}, fn)).ok());
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT10S"), fn)).ok());
  // The stored NULL is replaced by now + 10 s (Backstage would keep NULL until a trigger: a persistTask
  // quirk).
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(10s);
  ASSERT_TRUE(calls.WaitForCalls(1));
}

TEST_P(GlobalTaskTest, CanCancelARunningTask) {
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  Gate& hold = Make<Gate>();  // keeps the cancelled run on this node until the row has been inspected
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", Iso("PT1H"),
                                       [&](std::stop_token s) {
                                         if (calls.calls() == 0) {
                                           gate.Wait(s);
                                           hold.Wait(std::stop_token());
                                         }
                                         calls.Hit();
                                       }))
                  .ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  ASSERT_TRUE(plugin.CancelTask("task1").ok());
  ASSERT_TRUE(gate.WaitUntilStopObserved());  // at once on the node that cancelled, no liveness tick needed
  store::TaskStore& db = Direct(clock_);
  auto row = Row(db, "task1");
  EXPECT_FALSE(row->current_run_ticket.has_value());
  EXPECT_FALSE(row->current_run_started_at.has_value());
  EXPECT_FALSE(row->current_run_expires_at.has_value());
  EXPECT_EQ(row->last_run_ended_at, t0_);
  ASSERT_TRUE(row->last_run_error_json.has_value());
  EXPECT_NE(row->last_run_error_json->find("Task was cancelled"), std::string::npos);
  // Moved as a release would (fixed rate after the planned start), so the cancelled task is not due again at
  // once.
  EXPECT_EQ(row->next_run_start_at, t0_ + 1h);
  hold.Open();
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "was no longer owned by this node"); }));
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kIdle));
  EXPECT_EQ(calls.calls(), 1);
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 1h);
}

TEST_P(GlobalTaskTest, ACancelledManualTaskDoesNotRunAgain) {
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", ManualTrigger{},
                                       [&](std::stop_token s) {
                                         calls.Hit();
                                         gate.Wait(s);
                                       }))
                  .ok());
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(plugin.CancelTask("task1").ok());
  ASSERT_TRUE(gate.WaitUntilStopObserved());
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "was no longer owned by this node"); }));
  store::TaskStore& db = Direct(clock_);
  EXPECT_FALSE(Row(db, "task1")->next_run_start_at.has_value());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(10s);  // two polls
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());  // only a trigger runs it again
  ASSERT_TRUE(calls.WaitForCalls(2));
  EXPECT_EQ(calls.calls(), 2);
}

TEST_P(GlobalTaskTest, CannotCancelANonExistentTask) {
  PluginScheduler& plugin = Node();
  EXPECT_EQ(plugin.CancelTask("nope"), NotFoundError("Task nope does not exist"));
}

TEST_P(GlobalTaskTest, CannotCancelATaskThatIsNotRunning) {
  PluginScheduler& plugin = Node();
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", ManualTrigger{}, [](std::stop_token) {})).ok());
  EXPECT_EQ(plugin.CancelTask("task1"), ConflictError("Task task1 is not running"));
}

// ---- Run supervision: timeout, liveness -------------------------------------------------------------------

TEST_P(GlobalTaskTest, TheTimeoutRequestsStop) {
  PluginScheduler& plugin = Node();
  Gate& gate = Make<Gate>();
  TaskDefinition task = Global("task1", Iso("PT1H"), [&](std::stop_token s) { gate.Wait(s); });
  task.timeout = Iso("PT2S");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(1s);
  EXPECT_FALSE(gate.stop_observed());
  clock_.Advance(1s);
  ASSERT_TRUE(gate.WaitUntilStopObserved());
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
}

// A run that outlives its stop (a command in its kill grace) keeps its lease: no janitor frees the task while
// it may still run, and its owner's release then sets the next run by the cadence (not at once, as after a
// sweep).
TEST_P(GlobalTaskTest, ARunStillStoppingAfterItsTimeoutKeepsItsLease) {
  PluginScheduler& plugin = Node();
  Gate& running = Make<Gate>();
  Gate& stopping = Make<Gate>();
  TaskDefinition task = Global("task1", Iso("PT1H"), [&](std::stop_token s) {
    running.Wait(s);
    stopping.Wait(std::stop_token());
  });
  task.timeout = Iso("PT2S");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(2s);
  ASSERT_TRUE(running.WaitUntilStopObserved());
  store::TaskStore& db = Direct(clock_);
  ASSERT_TRUE(Eventually([&] {
    auto row = Row(db, "task1");
    return row && row->current_run_expires_at.has_value() && *row->current_run_expires_at > t0_ + 2s;
  }));
  clock_.Advance(3s);  // past the claim's own expiry
  auto swept = db.SweepExpiredTaskRuns({.error_json = SerializeErrorMessage("Task timed out")});
  ASSERT_TRUE(swept.ok());
  EXPECT_TRUE(swept->empty());
  EXPECT_TRUE(Row(db, "task1")->current_run_ticket.has_value());
  stopping.Open();
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 1h);
}

TEST_P(GlobalTaskTest, ALivenessCheckStopsARunWhoseTicketWasClearedElsewhere) {
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", Iso("PT1H"), [&](std::stop_token s) { gate.Wait(s); })).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  store::TaskStore& db = Direct(clock_);
  ASSERT_TRUE(db.CancelTask({"task1", SerializeErrorMessage("Task was cancelled")}).ok());  // another node
  EXPECT_FALSE(gate.stop_observed());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(5s);  // work_check_frequency
  ASSERT_TRUE(gate.WaitUntilStopObserved());
  EXPECT_TRUE(logs_.Contains(LogLevel::kInfo, "ticket is no longer valid"));
}

// ---- Backstage's PluginTaskSchedulerImpl cases ------------------------------------------------------------

TEST_P(GlobalTaskTest, CanRunTheV1HappyPath) {
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  auto& stop_possible = Make<std::atomic<bool>>(false);
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", Ms(5000),
                                       [&](std::stop_token s) {
                                         stop_possible = s.stop_possible();
                                         calls.Hit();
                                       }))
                  .ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  EXPECT_TRUE(stop_possible.load());
}

TEST_P(GlobalTaskTest, CanRunTheV2HappyPath) {
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("task1", CronFrequency{"* * * * * *", "UTC"},
                                       [&](std::stop_token) { calls.Hit(); }))
                  .ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  clock_.Advance(1s);
  ASSERT_TRUE(calls.WaitForCalls(2));
}

TEST_P(GlobalTaskTest, AbortsTheTaskIfTheShutdownHookIsInvokedAndReleasesTheRun) {
  Scheduler& node = AddNode(&clock_, nullptr);
  PluginScheduler& plugin = node.ForPlugin(kPlugin);
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", Iso("PT1H"), [&](std::stop_token s) { gate.Wait(s); })).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  node.Shutdown();
  EXPECT_TRUE(gate.stop_observed());
  store::TaskStore& db = Direct(clock_);
  auto row = Row(db, "task1");
  EXPECT_FALSE(row->current_run_ticket.has_value());
  EXPECT_EQ(row->last_run_ended_at, t0_);
  EXPECT_EQ(row->next_run_start_at, t0_ + 1h);
}

TEST_P(GlobalTaskTest, CanManuallyTriggerATaskWithoutWaitingForThePollInterval) {
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  TaskDefinition task = Global("task1", Iso("P1Y"), [&](std::stop_token) { calls.Hit(); });
  task.initial_delay = Iso("P1Y");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());
  // The fake clock does not move: the trigger wakes the poller, the run starts.
  ASSERT_TRUE(calls.WaitForCalls(1));
  EXPECT_EQ(clock_.WallNow(), t0_);
}

TEST_P(GlobalTaskTest, ATriggerOnAnotherNodeWakesThisNode) {
  PluginScheduler& runner = Node();
  PluginScheduler& other = Node();
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(
      runner.ScheduleTask(Global("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  // `other` has not scheduled task1: its trigger goes through the database and the notification channel.
  ASSERT_TRUE(other.ScheduleTask(Global("unrelated", ManualTrigger{}, [](std::stop_token) {})).ok());
  ASSERT_TRUE(clock_.WaitForWaiters(2));
  ASSERT_TRUE(other.TriggerTask("task1").ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  EXPECT_EQ(clock_.WallNow(), t0_);
}

TEST_P(GlobalTaskTest, CantTriggerANonExistentTask) {
  PluginScheduler& plugin = Node();
  EXPECT_EQ(plugin.TriggerTask("nope"), NotFoundError("Task nope does not exist"));
}

TEST_P(GlobalTaskTest, CantTriggerARunningTask) {
  PluginScheduler& plugin = Node();
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", Iso("PT1H"), [&](std::stop_token s) { gate.Wait(s); })).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  EXPECT_EQ(plugin.TriggerTask("task1"), ConflictError("Task task1 is currently running"));
  gate.Open();
}

TEST_P(GlobalTaskTest, ALocalTriggerOfAnUnknownIdGoesThroughTheDatabase) {
  PluginScheduler& plugin = Node();
  TaskDefinition task = Global("local1", Iso("PT1H"), [](std::stop_token) {});
  task.scope = TaskScope::kLocal;
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  EXPECT_EQ(plugin.TriggerTask("nope"), NotFoundError("Task nope does not exist"));
}

TEST_P(GlobalTaskTest, CreateScheduledTaskRunnerCanRunTheHappyPath) {
  PluginScheduler& plugin = Node();
  CallCounter& calls = Make<CallCounter>();
  TaskScheduleDefinition schedule;
  schedule.frequency = Iso("PT1M");
  schedule.timeout = Iso("PT1M");
  ASSERT_TRUE(plugin.CreateScheduledTaskRunner(schedule)
                  .Run({"task1", [&](std::stop_token) { calls.Hit(); }, {}})
                  .ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
}

TEST_P(GlobalTaskTest, CanFetchBothGlobalAndLocalTaskIds) {
  PluginScheduler& plugin = Node();
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT5S"), [](std::stop_token) {})).ok());
  TaskDefinition local = Global("task2", Iso("PT5S"), [](std::stop_token) {});
  local.scope = TaskScope::kLocal;
  ASSERT_TRUE(plugin.ScheduleTask(local).ok());
  std::vector<TaskDescriptor> tasks = plugin.GetScheduledTasks();
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].id, "task1");
  EXPECT_EQ(tasks[0].scope, TaskScope::kGlobal);
  EXPECT_EQ(tasks[0].settings.cadence, "PT5S");
  EXPECT_EQ(tasks[1].id, "task2");
  EXPECT_EQ(tasks[1].scope, TaskScope::kLocal);
}

TEST_P(GlobalTaskTest, TaskStatesShowTheClusterStateAndThisWorker) {
  PluginScheduler& plugin = Node();
  ASSERT_TRUE(plugin.ScheduleTask(Global("manual", ManualTrigger{}, [](std::stop_token) {})).ok());
  TaskDefinition local = Global("local", Iso("PT1H"), [](std::stop_token) {});
  local.scope = TaskScope::kLocal;
  local.initial_delay = Iso("PT1M");
  ASSERT_TRUE(plugin.ScheduleTask(local).ok());
  auto states = plugin.GetTaskStates();
  ASSERT_TRUE(states.ok());
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ((*states)[0].task_id, "manual");
  ASSERT_TRUE((*states)[0].task_state.has_value());
  EXPECT_EQ((*states)[0].task_state->status, TaskStatus::kIdle);
  EXPECT_FALSE((*states)[0].task_state->starts_at.has_value());
  EXPECT_EQ((*states)[0].worker_state, WorkerStatus::kIdle);
  EXPECT_EQ((*states)[1].task_id, "local");
  EXPECT_EQ((*states)[1].worker_state, WorkerStatus::kInitialWait);
  EXPECT_EQ((*states)[1].task_state->starts_at, t0_ + 1min);
}

TEST_P(GlobalTaskTest, AnIdCanBeRescheduledAsLocal) {
  PluginScheduler& plugin = Node();
  CallCounter& global_calls = Make<CallCounter>();
  CallCounter& local_calls = Make<CallCounter>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", ManualTrigger{}, [&](std::stop_token) { global_calls.Hit(); }))
          .ok());
  TaskDefinition local = Global("task1", ManualTrigger{}, [&](std::stop_token) { local_calls.Hit(); });
  local.scope = TaskScope::kLocal;
  ASSERT_TRUE(plugin.ScheduleTask(local).ok());
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());  // the local worker is asked first
  ASSERT_TRUE(local_calls.WaitForCalls(1));
  EXPECT_EQ(global_calls.calls(), 0);
  ASSERT_EQ(plugin.GetScheduledTasks().size(), 1u);
}

// ---- Failures ---------------------------------------------------------------------------------------------

TEST_P(GlobalTaskTest, AWorkerStopsWhenTheStoredSettingsCannotBeParsed) {
  PluginScheduler& plugin = Node(&logs_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(
      plugin.ScheduleTask(Global("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  // A newer octop writes settings this build cannot parse: like Backstage's worker, this node stops working
  // on the task (other nodes are assumed to handle it).
  faults_->newer_settings = true;
  ASSERT_TRUE(plugin.TriggerTask("task1").ok());
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kInfo, "can no longer parse"); }))
      << logs_.Dump();
  EXPECT_EQ(calls.calls(), 0);
}

TEST_P(GlobalTaskTest, ADatabaseOutageIsLoggedAndSurvived) {
  PluginScheduler& plugin = Node(&logs_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT10S"), [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  faults_->down = true;
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(10s);
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kWarn, "Task state poll failed"); }));
  EXPECT_EQ(plugin.TriggerTask("task1").code(), StatusCode::kUnavailable);
  faults_->down = false;
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(1s);  // the retry after a failed poll
  ASSERT_TRUE(calls.WaitForCalls(2));
}

// ---- Wiring -----------------------------------------------------------------------------------------------

TEST_P(GlobalTaskTest, CreatesTheDatabaseFeaturesOnFirstUse) {
  PluginScheduler& plugin = Node();
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", ManualTrigger{}, [](std::stop_token) {})).ok());
  store::TaskStore& db = Direct(clock_);
  auto version = db.SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, store::kLatestTaskSchemaVersion);
  auto rows = db.ListTasks({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().id, "task1");
  EXPECT_EQ(rows->front().settings_json, R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT1M"})");
}

// ---- Janitor ----------------------------------------------------------------------------------------------

TEST_P(GlobalTaskTest, TheJanitorFreesRunsWhoseTimeoutExpired) {
  PluginScheduler& plugin = Node(&logs_);
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", ManualTrigger{}, [](std::stop_token) {})).ok());
  store::TaskStore& db = Direct(clock_);
  // A run claimed by a node that died: it expires after 1 s.
  ASSERT_TRUE(db.UpsertTask({"orphan", R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT1S"})",
                             store::DbNowPlus{}, store::NullTime{}})
                  .ok());
  auto claimed = db.TryClaimTask({"orphan", "dead-node", 1s});
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(61s);  // the janitor's next sweep
  ASSERT_TRUE(Eventually(
      [&] { return logs_.Contains(LogLevel::kWarn, "Task timed out and was lost: test/orphan"); }));
  auto row = Row(db, "orphan");
  EXPECT_FALSE(row->current_run_ticket.has_value());
  EXPECT_FALSE(row->current_run_started_at.has_value());
  EXPECT_FALSE(row->current_run_expires_at.has_value());
  // Recorded as failed, with its end, as a Backstage node's janitor records it.
  ASSERT_TRUE(row->last_run_error_json.has_value());
  EXPECT_EQ(ParseSerializedError(*row->last_run_error_json)->message, "Task timed out");
  EXPECT_EQ(row->last_run_ended_at, t0_ + 61s);
}

// ---- Wall-clock steps (docs/reliability.md, "Clock steps") ------------------------------------------------

TEST_P(GlobalTaskTest, AForwardWallClockStepDoesNotLetTheJanitorTakeARunningTask) {
  // The wall clock (and the database's now with it, as on a SQLite host) jumps two hours during a run with a
  // ten-minute timeout: its expiry lies in the past. The node renews its lease; no janitor frees the task.
  PluginScheduler& plugin = Node(&logs_);
  Gate& gate = Make<Gate>();
  TaskDefinition task = Global("task1", Iso("PT1H"), [&](std::stop_token s) { gate.Wait(s); });
  task.timeout = Iso("PT10M");
  ASSERT_TRUE(plugin.ScheduleTask(task).ok());
  ASSERT_TRUE(WaitWorker(plugin, "task1", WorkerStatus::kRunning));
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.StepWall(2h);
  clock_.Advance(5s);  // the next liveness check
  store::TaskStore& db = Direct(clock_);
  ASSERT_TRUE(Eventually([&] {
    auto row = Row(db, "task1");
    return row && row->current_run_expires_at.has_value() && *row->current_run_expires_at > clock_.WallNow();
  })) << logs_.Dump();
  // Logged once every lease is renewed: after the row above changed (seen later than it under load).
  EXPECT_TRUE(Eventually([&] {
    return logs_.Contains(LogLevel::kWarn, "The database's clock stepped +7200.0 s");
  })) << logs_.Dump();
  auto swept = db.SweepExpiredTaskRuns({});
  ASSERT_TRUE(swept.ok());
  EXPECT_TRUE(swept->empty());
  // The run keeps its own timeout, on the monotonic clock: ten minutes from its start, not from the step.
  EXPECT_GT(*Row(db, "task1")->current_run_expires_at, clock_.WallNow() + 9min);
  EXPECT_LE(*Row(db, "task1")->current_run_expires_at, clock_.WallNow() + 10min + 5s);
  gate.Open();
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
}

TEST_P(GlobalTaskTest, ABackwardWallClockStepDelaysADurationTaskByOnePeriodAtMost) {
  // The wall clock steps two hours back between runs of a 10-second task: its stored next run lies two hours
  // and ten seconds ahead. Its cadence bounds it: the next run comes ten seconds later, not two hours.
  PluginScheduler& plugin = Node(&logs_);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin.ScheduleTask(Global("task1", Iso("PT10S"), [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitReleased(plugin, "task1"));
  store::TaskStore& db = Direct(clock_);
  EXPECT_EQ(Row(db, "task1")->next_run_start_at, t0_ + 10s);
  clock_.StepWall(-2h);
  clock_.Advance(5s);  // the next poll
  // The node sees the step at that poll, or before it: its loop may still be past the first run's release
  // when the wall steps (seen under load). Either way the next run is one period after the time it saw.
  ASSERT_TRUE(Eventually([&] {
    const auto next = Row(db, "task1")->next_run_start_at;
    return next == t0_ - 2h + 10s || next == t0_ - 2h + 15s;
  })) << logs_.Dump();
  for (int i = 0; i < 2; ++i) {  // ten seconds, in the steps of the poll
    ASSERT_TRUE(clock_.WaitForWaiters(1));
    clock_.Advance(5s);
  }
  ASSERT_TRUE(calls.WaitForCalls(2)) << logs_.Dump();
  EXPECT_EQ(calls.calls(), 2);
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "beyond its cadence"));
}

INSTANTIATE_TEST_SUITE_P(Backends, GlobalTaskTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

}  // namespace
}  // namespace octop::runtime_testing
