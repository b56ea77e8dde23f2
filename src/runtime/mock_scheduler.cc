#include <exception>
#include <functional>
#include <utility>

#include <octop/testing/mock_scheduler.h>

namespace octop::testing {

MockScheduler::MockScheduler(std::string plugin_id, MockSchedulerOptions options)
    : plugin_id_(std::move(plugin_id)), options_(options) {}

MockScheduler::~MockScheduler() { Shutdown(); }

MockScheduler::Entry* MockScheduler::FindLocked(std::string_view id) {
  for (auto& entry : entries_) {
    if (entry->definition.id == id) return entry.get();
  }
  return nullptr;
}

Status MockScheduler::ScheduleTask(TaskDefinition task) {
  const TaskScheduleDefinition schedule{task.frequency, task.timeout, task.initial_delay, task.scope};
  OCTOP_ASSIGN_OR_RETURN(TaskSettingsV2 settings, TaskSettingsFromSchedule(schedule));
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(task.id);
  if (entry == nullptr) {
    entries_.push_back(std::make_unique<Entry>());
    entry = entries_.back().get();
  }
  entry->descriptor = {task.id, task.scope, std::move(settings)};
  entry->definition = std::move(task);
  return Status::Ok();
}

Status MockScheduler::TriggerTask(std::string_view id) {
  std::shared_ptr<std::stop_source> stop;
  TaskFunction fn;
  std::optional<std::stop_token> signal;
  Entry* entry = nullptr;
  {
    std::lock_guard lock(mu_);
    entry = FindLocked(id);
    if (entry == nullptr) return NotFoundError("Task " + std::string(id) + " not found");
    if (shut_down_) return FailedPreconditionError("The scheduler has been shut down");
    if (entry->running != nullptr) return Status::Ok();
    stop = std::make_shared<std::stop_source>();
    entry->running = stop;
    fn = entry->definition.fn;
    signal = entry->definition.signal;
  }
  std::optional<std::string> error;
  {
    std::optional<std::stop_callback<std::function<void()>>> on_signal;
    if (signal.has_value())
      on_signal.emplace(*signal, std::function<void()>([stop] { stop->request_stop(); }));
    try {
      if (fn) fn(stop->get_token());
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "Unknown error";
    }
  }
  std::vector<std::promise<Status>> waiters;
  {
    std::lock_guard lock(mu_);
    entry->running.reset();
    waiters = std::exchange(entry->waiters, {});
  }
  for (auto& waiter : waiters) waiter.set_value(error.has_value() ? InternalError(*error) : Status::Ok());
  return Status::Ok();
}

Status MockScheduler::CancelTask(std::string_view id) {
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) return NotFoundError("Task " + std::string(id) + " not found");
  if (entry->running == nullptr) return ConflictError("Task " + std::string(id) + " is not running");
  entry->running->request_stop();
  return Status::Ok();
}

std::vector<TaskDescriptor> MockScheduler::GetScheduledTasks() const {
  std::lock_guard lock(mu_);
  std::vector<TaskDescriptor> out;
  for (const auto& entry : entries_) out.push_back(entry->descriptor);
  return out;
}

Result<std::vector<TaskStateEntry>> MockScheduler::GetTaskStates() {
  std::lock_guard lock(mu_);
  std::vector<TaskStateEntry> out;
  for (const auto& entry : entries_) {
    TaskState state;
    state.status = entry->running != nullptr ? TaskStatus::kRunning : TaskStatus::kIdle;
    out.push_back({entry->descriptor.id, plugin_id_, entry->descriptor.scope, entry->descriptor.settings,
                   state, entry->running != nullptr ? WorkerStatus::kRunning : WorkerStatus::kIdle});
  }
  return out;
}

void MockScheduler::Startup() {
  if (options_.skip_task_run_on_startup) return;
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& entry : entries_) {
      const TaskDefinition& d = entry->definition;
      if (std::holds_alternative<ManualTrigger>(d.frequency) && !options_.include_manual_tasks_on_startup)
        continue;
      if (d.initial_delay.has_value() && !options_.include_initial_delayed_tasks_on_startup) continue;
      ids.push_back(d.id);
    }
  }
  for (const std::string& id : ids) (void)TriggerTask(id);
}

void MockScheduler::Shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  for (auto& entry : entries_) {
    if (entry->running != nullptr) entry->running->request_stop();
  }
}

std::future<Status> MockScheduler::WaitForTask(std::string_view id) {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (entry == nullptr) {
    promise.set_value(NotFoundError("Task " + std::string(id) + " not found"));
  } else {
    entry->waiters.push_back(std::move(promise));
  }
  return future;
}

}  // namespace octop::testing
