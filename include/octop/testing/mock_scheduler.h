// MockScheduler: a PluginScheduler for plugin authors' tests, like Backstage's MockSchedulerService
// (@backstage/backend-test-utils): nothing runs on a timer; tasks run only when the test triggers them or at
// Startup(), synchronously in the calling thread.
//
// - ScheduleTask records the task (no database, no threads).
// - TriggerTask: NotFound "Task <id> not found" for an unknown id; a no-op (OK) while the task is already
//   running; otherwise runs fn in the calling thread with a fresh stop_token. Errors thrown by fn are
//   swallowed (they reach WaitForTask).
// - CancelTask requests stop on the running call; NotFound for an unknown id, Conflict when it is not
//   running.
// - Startup(), Backstage's startup hook, runs each qualifying task once, in registration order. Tasks with an
//   initial delay and manual tasks are skipped unless the options include them.
// - Shutdown() requests stop on every running call; afterwards triggers are refused.
//
// Thread-safety: all methods may be called from any thread; a trigger blocks only its own caller.
#ifndef OCTOP_TESTING_MOCK_SCHEDULER_H_
#define OCTOP_TESTING_MOCK_SCHEDULER_H_

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <octop/scheduler.h>

namespace octop::testing {

struct MockSchedulerOptions {
  // Startup() runs nothing.
  bool skip_task_run_on_startup = false;
  // Startup() also runs manual tasks.
  bool include_manual_tasks_on_startup = false;
  // Startup() also runs tasks that have an initial delay.
  bool include_initial_delayed_tasks_on_startup = false;
};

class MockScheduler final : public PluginScheduler {
 public:
  explicit MockScheduler(std::string plugin_id = "test", MockSchedulerOptions options = {});
  ~MockScheduler() override;

  const std::string& plugin_id() const override { return plugin_id_; }
  Status ScheduleTask(TaskDefinition task) override;
  Status TriggerTask(std::string_view id) override;
  Status CancelTask(std::string_view id) override;
  std::vector<TaskDescriptor> GetScheduledTasks() const override;
  Result<std::vector<TaskStateEntry>> GetTaskStates() override;

  void Startup();
  void Shutdown();

  // Like Backstage's waitForTask(id) promise: registered at once, ready when the next run of `id` that ends
  // after this call has ended -- OK if it completed, Internal with the error message if it threw. NotFound
  // (ready at once) for an unknown id. Call it before the trigger, then wait on the future.
  std::future<Status> WaitForTask(std::string_view id);

 private:
  struct Entry {
    TaskDefinition definition;
    TaskDescriptor descriptor;
    std::shared_ptr<std::stop_source> running;  // set while a call runs
    std::vector<std::promise<Status>> waiters;
  };
  Entry* FindLocked(std::string_view id);

  const std::string plugin_id_;
  const MockSchedulerOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // guarded by mu_; registration order
  bool shut_down_ = false;                       // guarded by mu_
};

}  // namespace octop::testing

#endif  // OCTOP_TESTING_MOCK_SCHEDULER_H_
