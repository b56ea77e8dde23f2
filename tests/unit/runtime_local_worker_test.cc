// The local worker (docs/scheduler.md, "Local tasks") driven by a FakeClock, plus two fixes to Backstage's: a
// local manual task waits for a trigger, and re-scheduling a task with another cadence takes effect.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <stop_token>

#include <gtest/gtest.h>

#include <octop/scheduler.h>
#include <octop/testing/fake_clock.h>

#include "../integration/runtime_test_support.h"
#include "runtime/scheduler_opener.h"
#include "store/store.h"

namespace octop {
namespace {

using namespace std::chrono_literals;
using runtime_testing::CallCounter;
using runtime_testing::Eventually;
using runtime_testing::Gate;
using runtime_testing::Iso;
using runtime_testing::LogCapture;
using runtime_testing::Ms;

class LocalWorkerTest : public ::testing::Test {
 protected:
  LocalWorkerTest() {
    SchedulerOptions options;
    options.clock = &clock_;
    options.logger = logs_.AsLogger();
    // A local-only plugin must never open its database.
    runtime::StoreFactory stores = [this](const std::string&,
                                          const Clock&) -> Result<std::unique_ptr<store::TaskStore>> {
      store_opens_++;
      return UnavailableError("local tasks must not touch the database");
    };
    scheduler_ = runtime::SchedulerOpener::Create(options, stores);
    plugin_ = &scheduler_->ForPlugin("test");
  }
  ~LocalWorkerTest() override {
    scheduler_->Shutdown();
    EXPECT_EQ(store_opens_.load(), 0);
  }

  TaskDefinition Local(std::string id, TaskFrequency frequency, TaskFunction fn) {
    TaskDefinition task;
    task.id = std::move(id);
    task.frequency = std::move(frequency);
    task.timeout = Iso("PT1M");
    task.scope = TaskScope::kLocal;
    task.fn = std::move(fn);
    return task;
  }

  TaskStateEntry Entry(const std::string& id) {
    auto states = plugin_->GetTaskStates();
    EXPECT_TRUE(states.ok()) << states.status().ToString();
    for (auto& e : *states) {
      if (e.task_id == id) return e;
    }
    ADD_FAILURE() << "no state for " << id;
    return {};
  }

  // Waits until the task's current run has been recorded as ended `n` times in total (lastRunEndedAt moves).
  bool WaitIdle(const std::string& id) {
    return Eventually([&] {
      TaskStateEntry e = Entry(id);
      return e.task_state.has_value() && e.task_state->status == TaskStatus::kIdle &&
             e.worker_state == WorkerStatus::kIdle;
    });
  }

  // Objects task functions use must outlive the runs, which end only when the fixture shuts the scheduler
  // down.
  template <typename T, typename... Args>
  T& Make(Args&&... args) {
    auto object = std::make_shared<T>(std::forward<Args>(args)...);
    kept_.push_back(object);
    return *object;
  }

  std::vector<std::shared_ptr<void>> kept_;
  testing::FakeClock clock_;
  LogCapture logs_;
  std::atomic<int> store_opens_{0};
  std::unique_ptr<Scheduler> scheduler_;
  PluginScheduler* plugin_ = nullptr;
};

TEST_F(LocalWorkerTest, RunsTheHappyPathWithIsoDurationAndHandlesCancellation) {
  CallCounter& calls = Make<CallCounter>();
  CallCounter& probe = Make<CallCounter>();
  std::stop_source signal;
  TaskDefinition task = Local("task1", Ms(200), [&](std::stop_token) { calls.Hit(); });
  task.initial_delay = Ms(200);
  task.signal = signal.get_token();
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  // A probe on the same schedule: once it has run at an instant, the dispatcher has decided about task1 too.
  TaskDefinition probe_task = Local("zprobe", Ms(200), [&](std::stop_token) { probe.Hit(); });
  probe_task.initial_delay = Ms(200);
  ASSERT_TRUE(plugin_->ScheduleTask(probe_task).ok());

  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(100ms);
  EXPECT_EQ(calls.calls(), 0);
  clock_.Advance(100ms);  // 200 ms: the initial delay is over
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(probe.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(WaitIdle("zprobe"));
  clock_.Advance(100ms);  // 300 ms
  clock_.Advance(100ms);  // 400 ms: 200 ms after the first start
  ASSERT_TRUE(calls.WaitForCalls(2));
  ASSERT_TRUE(probe.WaitForCalls(2));
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(WaitIdle("zprobe"));

  signal.request_stop();
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "Task worker finished: test/task1"); }));
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(200ms);
    ASSERT_TRUE(probe.WaitForCalls(3 + i));
    ASSERT_TRUE(WaitIdle("zprobe"));
  }
  EXPECT_EQ(calls.calls(), 2);
}

TEST_F(LocalWorkerTest, RunsTheHappyPathWithACronExpressionAndHandlesCancellation) {
  CallCounter& calls = Make<CallCounter>();
  CallCounter& probe = Make<CallCounter>();
  std::stop_source signal;
  TaskDefinition task =
      Local("task1", CronFrequency{"* * * * * *", "UTC"}, [&](std::stop_token) { calls.Hit(); });
  task.initial_delay = Ms(200);
  task.signal = signal.get_token();
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  TaskDefinition probe_task =
      Local("zprobe", CronFrequency{"* * * * * *", "UTC"}, [&](std::stop_token) { probe.Hit(); });
  probe_task.initial_delay = Ms(200);
  ASSERT_TRUE(plugin_->ScheduleTask(probe_task).ok());

  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(100ms);
  EXPECT_EQ(calls.calls(), 0);
  clock_.Advance(200ms);  // 300 ms: runs once right after the initial delay
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(probe.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(WaitIdle("zprobe"));
  EXPECT_EQ(Entry("task1").task_state->starts_at, testing::FakeClock::DefaultStart() + 1s);
  clock_.Advance(600ms);  // 900 ms: before the next second boundary
  EXPECT_EQ(calls.calls(), 1);
  clock_.Advance(100ms);  // 1 s
  ASSERT_TRUE(calls.WaitForCalls(2));
  ASSERT_TRUE(probe.WaitForCalls(2));
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(WaitIdle("zprobe"));

  signal.request_stop();
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "Task worker finished: test/task1"); }));
  clock_.Advance(1s);
  ASSERT_TRUE(probe.WaitForCalls(3));
  ASSERT_TRUE(WaitIdle("zprobe"));
  EXPECT_EQ(calls.calls(), 2);
}

TEST_F(LocalWorkerTest, CanTriggerToAbortWait) {
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin_->ScheduleTask(Local("task1", Iso("PT1H"), [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));  // local tasks run once at start
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(plugin_->TriggerTask("task1").ok());
  // No time passes on the fake clock: the trigger alone starts the run.
  ASSERT_TRUE(calls.WaitForCalls(2));
}

TEST_F(LocalWorkerTest, GoesThroughTheExpectedStates) {
  Gate& gate1 = Make<Gate>();
  Gate& gate2 = Make<Gate>();
  Gate& gate3 = Make<Gate>();
  auto& run = Make<std::atomic<int>>(0);
  TaskDefinition task = Local("task1", Iso("PT1H"), [&](std::stop_token stop) {
    const int n = ++run;
    if (n == 1) gate1.Wait(stop);
    if (n == 2) {
      gate2.Wait(stop);
      throw std::runtime_error("boom failed");
    }
    if (n == 3) gate3.Wait(stop);
  });
  task.initial_delay = Iso("PT1S");
  task.timeout = Iso("PT10M");
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  const WallTime t0 = clock_.WallNow();

  TaskStateEntry e = Entry("task1");
  ASSERT_TRUE(e.task_state.has_value());
  EXPECT_EQ(e.task_state->status, TaskStatus::kIdle);
  EXPECT_EQ(e.task_state->starts_at, t0 + 1s);
  EXPECT_EQ(e.worker_state, WorkerStatus::kInitialWait);
  EXPECT_EQ(e.scope, TaskScope::kLocal);
  EXPECT_EQ(e.plugin_id, "test");

  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(1s);
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  e = Entry("task1");
  EXPECT_EQ(e.task_state->status, TaskStatus::kRunning);
  EXPECT_EQ(e.task_state->started_at, t0 + 1s);
  EXPECT_EQ(e.task_state->times_out_at, t0 + 1s + 10min);
  EXPECT_FALSE(e.task_state->last_run_ended_at.has_value());

  gate1.Open();
  ASSERT_TRUE(WaitIdle("task1"));
  e = Entry("task1");
  EXPECT_EQ(e.task_state->last_run_ended_at, t0 + 1s);
  EXPECT_EQ(e.task_state->starts_at, t0 + 1s + 1h);
  EXPECT_FALSE(e.task_state->last_run_error.has_value());

  ASSERT_TRUE(plugin_->TriggerTask("task1").ok());
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  e = Entry("task1");
  EXPECT_EQ(e.task_state->status, TaskStatus::kRunning);
  EXPECT_EQ(e.task_state->last_run_ended_at, t0 + 1s);  // kept while running

  gate2.Open();
  ASSERT_TRUE(WaitIdle("task1"));
  e = Entry("task1");
  ASSERT_TRUE(e.task_state->last_run_error.has_value());
  EXPECT_NE(e.task_state->last_run_error->find("boom failed"), std::string::npos);

  ASSERT_TRUE(plugin_->TriggerTask("task1").ok());
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  EXPECT_TRUE(Entry("task1").task_state->last_run_error.has_value());
  gate3.Open();
  ASSERT_TRUE(WaitIdle("task1"));
  EXPECT_FALSE(Entry("task1").task_state->last_run_error.has_value());
}

TEST_F(LocalWorkerTest, ManualTaskWaitsUntilTriggered) {
  CallCounter& calls = Make<CallCounter>();
  CallCounter& probe = Make<CallCounter>();
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("manual", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("zprobe", Iso("PT1S"), [&](std::stop_token) { probe.Hit(); })).ok());
  ASSERT_TRUE(probe.WaitForCalls(1));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WaitIdle("zprobe"));
    clock_.Advance(1s);
    ASSERT_TRUE(probe.WaitForCalls(2 + i));
  }
  EXPECT_EQ(calls.calls(), 0);
  TaskStateEntry e = Entry("manual");
  EXPECT_EQ(e.task_state->status, TaskStatus::kIdle);
  EXPECT_FALSE(e.task_state->starts_at.has_value());
  EXPECT_FALSE(logs_.Contains(LogLevel::kWarn, "manual"));

  ASSERT_TRUE(plugin_->TriggerTask("manual").ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle("manual"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitIdle("zprobe"));
    clock_.Advance(1s);
    ASSERT_TRUE(probe.WaitForCalls(7 + i));
  }
  EXPECT_EQ(calls.calls(), 1);
}

TEST_F(LocalWorkerTest, SwitchingFromManualToATimedCadenceTakesEffect) {
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(plugin_->ScheduleTask(Local("task1", Iso("PT1S"), [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle("task1"));
  clock_.Advance(1s);
  ASSERT_TRUE(calls.WaitForCalls(2));
  std::vector<TaskDescriptor> tasks = plugin_->GetScheduledTasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].settings.cadence, "PT1S");
}

TEST_F(LocalWorkerTest, SwitchingFromATimedCadenceToManualStopsTheTimer) {
  CallCounter& calls = Make<CallCounter>();
  CallCounter& probe = Make<CallCounter>();
  ASSERT_TRUE(plugin_->ScheduleTask(Local("task1", Iso("PT1S"), [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle("task1"));
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("task1", ManualTrigger{}, [&](std::stop_token) { calls.Hit(); })).ok());
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("zprobe", Iso("PT1S"), [&](std::stop_token) { probe.Hit(); })).ok());
  ASSERT_TRUE(probe.WaitForCalls(1));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitIdle("zprobe"));
    clock_.Advance(1s);
    ASSERT_TRUE(probe.WaitForCalls(2 + i));
  }
  EXPECT_EQ(calls.calls(), 1);
}

TEST_F(LocalWorkerTest, TimeoutRequestsStop) {
  Gate& gate = Make<Gate>();
  TaskDefinition task = Local("task1", Iso("PT1H"), [&](std::stop_token stop) { gate.Wait(stop); });
  task.timeout = Iso("PT5S");
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(4s);
  EXPECT_FALSE(gate.stop_observed());
  clock_.Advance(1s);
  ASSERT_TRUE(gate.WaitUntilStopObserved());
  ASSERT_TRUE(WaitIdle("task1"));
}

TEST_F(LocalWorkerTest, CanCancelARunningTaskAndCannotCancelAnIdleOne) {
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("task1", Iso("PT1H"), [&](std::stop_token stop) { gate.Wait(stop); }))
          .ok());
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  Status conflict = plugin_->TriggerTask("task1");
  EXPECT_EQ(conflict, ConflictError("Task task1 is currently running"));
  EXPECT_TRUE(plugin_->CancelTask("task1").ok());
  ASSERT_TRUE(gate.WaitUntilStopObserved());
  ASSERT_TRUE(WaitIdle("task1"));
  EXPECT_EQ(plugin_->CancelTask("task1"), ConflictError("Task task1 is not running"));
}

TEST_F(LocalWorkerTest, RunsNeverOverlapOnOneNode) {
  auto& active = Make<std::atomic<int>>(0);
  auto& max_active = Make<std::atomic<int>>(0);
  CallCounter& calls = Make<CallCounter>();
  TaskDefinition task = Local("task1", Ms(100), [&](std::stop_token) {
    const int now_active = ++active;
    max_active = std::max(max_active.load(), now_active);
    calls.Hit();
    --active;
  });
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(calls.WaitForCalls(i));
    (void)plugin_->TriggerTask("task1");  // Conflict or a run; never a second concurrent run
    clock_.Advance(100ms);
  }
  EXPECT_EQ(max_active.load(), 1);
}

TEST_F(LocalWorkerTest, ShutdownStopsARunningTask) {
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(
      plugin_->ScheduleTask(Local("task1", Iso("PT1H"), [&](std::stop_token stop) { gate.Wait(stop); }))
          .ok());
  ASSERT_TRUE(Eventually([&] { return Entry("task1").worker_state == WorkerStatus::kRunning; }));
  scheduler_->Shutdown();
  EXPECT_TRUE(gate.stop_observed());
  EXPECT_EQ(plugin_->ScheduleTask(Local("task2", Iso("PT1H"), [](std::stop_token) {})).code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(LocalWorkerTest, ATaskSignalAlreadyStoppedNeverRuns) {
  CallCounter& calls = Make<CallCounter>();
  std::stop_source signal;
  signal.request_stop();
  TaskDefinition task = Local("task1", Iso("PT1S"), [&](std::stop_token) { calls.Hit(); });
  task.signal = signal.get_token();
  ASSERT_TRUE(plugin_->ScheduleTask(task).ok());
  ASSERT_TRUE(
      Eventually([&] { return logs_.Contains(LogLevel::kInfo, "Task worker finished: test/task1"); }));
  EXPECT_EQ(calls.calls(), 0);
}

}  // namespace
}  // namespace octop
