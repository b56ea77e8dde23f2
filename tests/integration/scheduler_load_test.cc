// Idle cost of many registered global tasks (docs/performance.md's target: idle database load independent of
// the number of tasks, at most 2 statements per second per node at 10,000 tasks), on a FakeClock so a
// simulated minute is quick.
#include <thread>

#include <gtest/gtest.h>
#include <malloc.h>

#include "scheduler_test_env.h"

namespace octop::runtime_testing {
namespace {

using namespace std::chrono_literals;

class IdleLoadTest : public SchedulerTestBase {
 protected:
  testing::FakeClock clock_;
};

TEST_P(IdleLoadTest, TenThousandIdleGlobalTasksCostAtMostTwoStatementsPerSecond) {
  constexpr int kTasks = 10000;
  PluginScheduler& plugin = AddNode(&clock_, nullptr).ForPlugin(kPlugin);
  ASSERT_TRUE(plugin.ScheduleTask(Global("warmup", ManualTrigger{}, [](std::stop_token) {})).ok());
  const std::size_t heap_before = mallinfo2().uordblks;
  for (int i = 0; i < kTasks; ++i) {
    // Not due within the simulated minute: half manual, half a daily cron.
    TaskFrequency frequency =
        i % 2 == 0 ? TaskFrequency(ManualTrigger{}) : TaskFrequency(CronFrequency{"0 3 * * *", "UTC"});
    ASSERT_TRUE(
        plugin.ScheduleTask(Global("task-" + std::to_string(i), frequency, [](std::stop_token) {})).ok());
  }
  const std::size_t heap_after = mallinfo2().uordblks;
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  clock_.Advance(1s);  // let the poll caused by the registrations happen
  ASSERT_TRUE(clock_.WaitForWaiters(1));

  // Simulate a minute by moving time from one deadline the poller asked for to the next. A deadline that has
  // passed but whose waiter has not woken yet advances by zero, so this waits for the poller at every step.
  const long before = faults_->statements.load();
  const SteadyTime start = clock_.SteadyNow();
  const SteadyTime end = start + 60s;
  while (clock_.SteadyNow() < end) {
    clock_.AdvanceToNextDeadline();
    std::this_thread::yield();
  }
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  const double seconds = std::chrono::duration<double>(clock_.SteadyNow() - start).count();
  const long statements = faults_->statements.load() - before;
  const double per_second = static_cast<double>(statements) / seconds;
  const double bytes_per_task = static_cast<double>(heap_after - heap_before) / kTasks;
  std::printf(
      "[%s] %d idle global tasks: %ld statements in %.0f simulated s (%.2f/s); %.0f heap bytes per "
      "registered task\n",
      backend().name.c_str(), kTasks, statements, seconds, per_second, bytes_per_task);
  EXPECT_LE(per_second, 2.0);
  EXPECT_LT(bytes_per_task, 8192.0);
}

INSTANTIATE_TEST_SUITE_P(Backends, IdleLoadTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

}  // namespace
}  // namespace octop::runtime_testing
