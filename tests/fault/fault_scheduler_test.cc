// Fault injection at the store seam for global tasks (docs/reliability.md): a FaultyTaskStore under each
// scheduler node drops the connection before a claim or release statement, or after its COMMIT (an ambiguous
// commit), and fails trigger/cancel/state reads. Every test asserts the scheduler's invariants: the task
// still runs later, never twice at once, a run's ticket stays until a release or the janitor frees it, and a
// failing call returns a clear Status. Time is a FakeClock that the store also reads as the database's now.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "faulty_store.h"
#include "runtime/scheduler_opener.h"
#include "scheduler_test_env.h"

namespace octop::fault_testing {
namespace {

using namespace std::chrono_literals;
using runtime_testing::CallCounter;
using runtime_testing::Eventually;
using runtime_testing::Gate;
using runtime_testing::Iso;
using runtime_testing::LogCapture;

// Counts runs and how many run at once, across nodes.
struct RunRecord {
  CallCounter calls;
  std::atomic<int> active{0};
  std::atomic<int> max_active{0};
  void Enter() {
    const int now = ++active;
    int seen = max_active.load();
    while (now > seen && !max_active.compare_exchange_weak(seen, now)) {
    }
    calls.Hit();
  }
  void Leave() { --active; }
};

class FaultSchedulerTest : public runtime_testing::SchedulerTestBase {
 protected:
  // A scheduler node whose every store goes through a FaultyStore driven by `plan`.
  PluginScheduler& FaultyNode(std::shared_ptr<FaultPlan> plan,
                              std::chrono::milliseconds janitor = std::chrono::minutes(1)) {
    SchedulerOptions options;
    options.clock = &clock_;
    options.logger = logs_.AsLogger();
    options.janitor_interval = janitor;
    auto backend_copy = backend();
    std::string prefix = ns_prefix_;
    runtime::StoreFactory stores = [backend_copy, prefix, plan](
                                       const std::string& plugin_id,
                                       const Clock& c) -> Result<std::unique_ptr<store::TaskStore>> {
      store::StoreOptions o;
      o.clock = &c;
      OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<store::TaskStore> inner,
                             backend_copy.open(prefix + "_" + plugin_id, o));
      return std::unique_ptr<store::TaskStore>(std::make_unique<FaultyTaskStore>(std::move(inner), plan));
    };
    nodes_.push_back(runtime::SchedulerOpener::Create(options, stores));
    return nodes_.back()->ForPlugin(kPlugin);
  }

  // A manual task: it runs only when triggered, so every run a test sees comes from one trigger.
  TaskDefinition Manual(const std::string& id, RunRecord& record, Gate* gate = nullptr) {
    return Global(id, ManualTrigger{}, [&record, gate](std::stop_token stop) {
      record.Enter();
      if (gate != nullptr) gate->Wait(stop);
      record.Leave();
    });
  }

  // Advances fake time in steps until `condition` holds (bounded by real time, like every wait here).
  bool AdvanceUntil(const std::function<bool()>& condition, std::chrono::milliseconds step = 250ms) {
    return Eventually([&] {
      if (condition()) return true;
      clock_.Advance(step);
      return false;
    });
  }

  bool Released(store::TaskStore& db, const std::string& id) {
    auto row = Row(db, id);
    return row.has_value() && !row->current_run_ticket.has_value() && row->last_run_ended_at.has_value();
  }

  testing::FakeClock clock_;
  std::shared_ptr<FaultPlan> plan_ = std::make_shared<FaultPlan>();
};

TEST_P(FaultSchedulerTest, ClaimDroppedBeforeTheStatementRunsTheTaskOnALaterTickOnce) {
  PluginScheduler& plugin = FaultyNode(plan_);
  RunRecord& record = Make<RunRecord>();
  ASSERT_TRUE(plugin.ScheduleTask(Manual("t", record)).ok());
  store::TaskStore& db = Direct(clock_);

  plan_->FailNext(StoreOp::kTryClaimTask, 2);
  ASSERT_TRUE(plugin.TriggerTask("t").ok());
  // A wake-up (the trigger's notification) may retry at once, so only the end state is asserted.

  ASSERT_TRUE(AdvanceUntil([&] { return Released(db, "t"); })) << logs_.Dump();
  EXPECT_EQ(plan_->injected(StoreOp::kTryClaimTask), 2);
  EXPECT_EQ(record.calls.calls(), 1);
  EXPECT_EQ(record.max_active.load(), 1);
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Failed to claim task test/t"));
  // A manual task is released with no next run: it does not run again by itself.
  EXPECT_FALSE(Row(db, "t")->next_run_start_at.has_value());
}

TEST_P(FaultSchedulerTest, AmbiguousClaimHoldsTheTicketUntilTheJanitorFreesItThenRunsOnce) {
  PluginScheduler& plugin = FaultyNode(plan_, 1s);
  RunRecord& record = Make<RunRecord>();
  ASSERT_TRUE(plugin.ScheduleTask(Manual("t", record)).ok());
  store::TaskStore& db = Direct(clock_);
  const WallTime t0 = clock_.WallNow();

  plan_->FailNext(StoreOp::kTryClaimTask, 1, FaultKind::kAmbiguousCommit);
  ASSERT_TRUE(plugin.TriggerTask("t").ok());
  // The fault is counted before the inner call runs: wait for the claim itself to land.
  ASSERT_TRUE(Eventually([&] {
    auto r = Row(db, "t");
    return r.has_value() && r->current_run_ticket.has_value();
  })) << "the claim committed although the caller saw an error";
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kWarn, "Failed to claim task test/t"); }));
  auto row = Row(db, "t");
  ASSERT_TRUE(row.has_value());
  ASSERT_TRUE(row->current_run_expires_at.has_value());
  EXPECT_EQ(*row->current_run_expires_at, t0 + 1min);

  // Held by a ticket nobody runs: the cluster sees it running, nothing runs it, a trigger is refused.
  Status again = plugin.TriggerTask("t");
  EXPECT_EQ(again.code(), StatusCode::kConflict) << again.ToString();
  clock_.Advance(30s);
  EXPECT_EQ(record.calls.calls(), 0);
  EXPECT_TRUE(Row(db, "t")->current_run_ticket.has_value());

  // Past the timeout the janitor clears the orphaned ticket (recording the lost run as timed out); the
  // trigger is still pending, so it runs now, and its own release clears that error.
  ASSERT_TRUE(AdvanceUntil([&] { return Released(db, "t") && !Row(db, "t")->last_run_error_json; }, 1s))
      << logs_.Dump();
  EXPECT_EQ(record.calls.calls(), 1);
  EXPECT_EQ(record.max_active.load(), 1);
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Task timed out and was lost: test/t"));
  EXPECT_GE(clock_.WallNow(), t0 + 1min);
}

TEST_P(FaultSchedulerTest, ReleaseDroppedBeforeTheStatementIsRetriedAndNothingIsLost) {
  PluginScheduler& plugin = FaultyNode(plan_);
  RunRecord& record = Make<RunRecord>();
  ASSERT_TRUE(plugin.ScheduleTask(Manual("t", record)).ok());
  store::TaskStore& db = Direct(clock_);

  plan_->FailNext(StoreOp::kTryReleaseTask, 3);
  ASSERT_TRUE(plugin.TriggerTask("t").ok());
  ASSERT_TRUE(record.calls.WaitForCalls(1));
  ASSERT_TRUE(Eventually([&] { return plan_->injected(StoreOp::kTryReleaseTask) >= 1; }));
  // The ticket stays while the release cannot be written: no other node may start the task meanwhile.
  EXPECT_TRUE(Row(db, "t")->current_run_ticket.has_value());

  ASSERT_TRUE(AdvanceUntil([&] { return Released(db, "t"); })) << logs_.Dump();
  EXPECT_EQ(plan_->injected(StoreOp::kTryReleaseTask), 3);
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Failed to release task test/t"));

  // The task is intact: the next trigger runs it again, exactly once more.
  ASSERT_TRUE(Eventually([&] { return plugin.TriggerTask("t").ok(); }));
  ASSERT_TRUE(AdvanceUntil([&] { return record.calls.calls() == 2 && Released(db, "t"); }));
  EXPECT_EQ(record.max_active.load(), 1);
}

TEST_P(FaultSchedulerTest, ANodeThatCannotReleaseIsReclaimedAfterTheTimeoutAndItsLateReleaseIsFenced) {
  auto broken = std::make_shared<FaultPlan>();
  PluginScheduler& a = FaultyNode(broken, 1s);
  RunRecord& record = Make<RunRecord>();
  Gate& b_gate = Make<Gate>();
  ASSERT_TRUE(a.ScheduleTask(Manual("t", record)).ok());
  store::TaskStore& db = Direct(clock_);

  broken->FailForever(StoreOp::kTryReleaseTask);
  ASSERT_TRUE(a.TriggerTask("t").ok());
  ASSERT_TRUE(record.calls.WaitForCalls(1));
  ASSERT_TRUE(Eventually([&] { return broken->injected(StoreOp::kTryReleaseTask) >= 1; }));
  const std::string a_ticket = Row(db, "t")->current_run_ticket.value_or("");
  ASSERT_FALSE(a_ticket.empty());

  // Node B joins after A's run started, so only A could have claimed that trigger.
  PluginScheduler& b = FaultyNode(plan_, 1s);
  ASSERT_TRUE(b.ScheduleTask(Manual("t", record, &b_gate)).ok());
  // After A's run expires, a janitor frees the row and B runs the still-pending trigger.
  ASSERT_TRUE(AdvanceUntil([&] { return record.calls.calls() == 2; }, 1s)) << logs_.Dump();
  auto during = Row(db, "t");
  ASSERT_TRUE(during.has_value() && during->current_run_ticket.has_value());
  const std::string b_ticket = *during->current_run_ticket;
  EXPECT_NE(b_ticket, a_ticket);

  // A's connection comes back: its stale release matches no ticket and must not end B's run.
  broken->ClearAll();
  ASSERT_TRUE(AdvanceUntil(
      [&] { return logs_.Contains(LogLevel::kInfo, "was no longer owned by this node when its run ended"); },
      50ms));
  EXPECT_EQ(Row(db, "t")->current_run_ticket, b_ticket);
  b_gate.Open();
  ASSERT_TRUE(AdvanceUntil([&] { return Released(db, "t"); }));
  EXPECT_EQ(record.calls.calls(), 2);
  EXPECT_EQ(record.max_active.load(), 1) << "A's run had ended before B's began";
}

TEST_P(FaultSchedulerTest, AmbiguousReleaseIsRetriedHarmlessly) {
  PluginScheduler& plugin = FaultyNode(plan_);
  RunRecord& record = Make<RunRecord>();
  ASSERT_TRUE(plugin.ScheduleTask(Manual("t", record)).ok());
  store::TaskStore& db = Direct(clock_);

  plan_->FailNext(StoreOp::kTryReleaseTask, 1, FaultKind::kAmbiguousCommit);
  ASSERT_TRUE(plugin.TriggerTask("t").ok());
  ASSERT_TRUE(record.calls.WaitForCalls(1));
  // The release committed; the retry finds no ticket of ours and only logs it.
  ASSERT_TRUE(Eventually([&] { return Released(db, "t"); }));
  EXPECT_EQ(plan_->injected(StoreOp::kTryReleaseTask), 1);
  ASSERT_TRUE(AdvanceUntil([&] { return plan_->calls(StoreOp::kTryReleaseTask) >= 2; }));
  ASSERT_TRUE(Eventually([&] { return plugin.TriggerTask("t").ok(); }));
  ASSERT_TRUE(AdvanceUntil([&] { return record.calls.calls() == 2 && Released(db, "t"); }));
  EXPECT_EQ(record.max_active.load(), 1);
}

TEST_P(FaultSchedulerTest, TriggerCancelAndStateReadsReturnAClearStatusWhenTheStoreFails) {
  PluginScheduler& plugin = FaultyNode(plan_);
  RunRecord& record = Make<RunRecord>();
  Gate& gate = Make<Gate>();
  ASSERT_TRUE(plugin.ScheduleTask(Manual("t", record, &gate)).ok());
  store::TaskStore& db = Direct(clock_);

  plan_->FailNext(StoreOp::kTriggerTask, 1);
  Status trigger = plugin.TriggerTask("t");
  EXPECT_EQ(trigger.code(), StatusCode::kUnavailable) << trigger.ToString();
  EXPECT_NE(trigger.message().find("connection lost"), std::string::npos) << trigger.ToString();
  EXPECT_FALSE(Row(db, "t")->next_run_start_at.has_value()) << "a failed trigger wrote nothing";

  plan_->FailNext(StoreOp::kListTasks, 1);
  auto states = plugin.GetTaskStates();
  EXPECT_EQ(states.status().code(), StatusCode::kUnavailable);

  ASSERT_TRUE(plugin.TriggerTask("t").ok());
  ASSERT_TRUE(record.calls.WaitForCalls(1));
  plan_->FailNext(StoreOp::kCancelTask, 1);
  Status cancel = plugin.CancelTask("t");
  EXPECT_EQ(cancel.code(), StatusCode::kUnavailable) << cancel.ToString();
  EXPECT_TRUE(Row(db, "t")->current_run_ticket.has_value()) << "a failed cancel left the run alone";
  EXPECT_FALSE(gate.stop_observed());

  // The store is back: the same cancel works and stops the run.
  ASSERT_TRUE(plugin.CancelTask("t").ok());
  ASSERT_TRUE(AdvanceUntil([&] { return gate.stop_observed(); }));
  ASSERT_TRUE(AdvanceUntil([&] { return Released(db, "t"); }));
  EXPECT_EQ(record.calls.calls(), 1);

  // Registering while the store fails is refused whole: nothing is registered.
  plan_->FailNext(StoreOp::kUpsertTask, 1);
  Status scheduled = plugin.ScheduleTask(Manual("u", record));
  EXPECT_EQ(scheduled.code(), StatusCode::kUnavailable) << scheduled.ToString();
  EXPECT_NE(scheduled.message().find("Failed to persist task"), std::string::npos);
  EXPECT_FALSE(Row(db, "u").has_value());
  auto ids = plugin.GetScheduledTasks();
  EXPECT_TRUE(std::none_of(ids.begin(), ids.end(), [](const TaskDescriptor& d) { return d.id == "u"; }));
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultSchedulerTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         runtime_testing::BackendName);

}  // namespace
}  // namespace octop::fault_testing
