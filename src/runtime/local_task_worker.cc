#include "runtime/local_task_worker.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include <octop/error_json.h>

#include "runtime/scheduler_metrics.h"

namespace octop::runtime {

namespace {

// The longest the dispatcher sleeps with nothing due, so a lost wake-up could never stall it for good.
constexpr std::chrono::hours kMaxSleep{1};

WallTime ToWall(SteadyTime at, SteadyTime steady_now, WallTime wall_now) {
  return wall_now + std::chrono::duration_cast<WallTime::duration>(at - steady_now);
}

}  // namespace

LocalTaskWorker::LocalTaskWorker(const SchedulerContext& context, std::string plugin_id)
    : context_(context), plugin_id_(std::move(plugin_id)) {}

LocalTaskWorker::~LocalTaskWorker() { Join(); }

void LocalTaskWorker::Schedule(const std::string& id, TaskSettingsV2 settings, TaskCadence cadence,
                               TaskFunction fn, std::optional<std::stop_token> signal) {
  // The callback may run right here (a signal already stopped), so it is built before taking mu_ and only
  // touches an atomic and the wake signal.
  auto fired = std::make_shared<std::atomic<bool>>(false);
  TaskSignalCallback callback = MakeTaskSignalCallback(signal, fired, wake_);
  TaskSignalCallback old_callback;
  {
    std::lock_guard lock(mu_);
    if (joined_) return;
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      it = tasks_.emplace(id, std::make_unique<Task>()).first;
      it->second->id = id;  // never written again: run threads read it without the lock
    }
    Task& task = *it->second;
    task.settings = std::move(settings);
    task.cadence = std::move(cadence);
    task.fn = std::move(fn);
    task.unscheduled = false;
    task.stopped = false;
    task.signal_fired = fired;
    old_callback = std::exchange(task.signal_callback, std::move(callback));
    if (!RunningLocked(task)) StartWaitLocked(task);
    if (!dispatcher_.joinable()) {
      dispatcher_ = std::thread([this] { Loop(context_.shutdown); });
    }
  }
  // Destroyed outside mu_: a stop_callback's destructor waits for a callback running on another thread.
  old_callback.reset();
  wake_.Notify();
}

void LocalTaskWorker::Unschedule(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return;
    it->second->unscheduled = true;
    it->second->next_start.reset();
  }
  wake_.Notify();
}

bool LocalTaskWorker::Has(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  return it != tasks_.end() && !it->second->unscheduled;
}

Status LocalTaskWorker::Trigger(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second->unscheduled) {
      return NotFoundError("Task " + std::string(id) + " does not exist");
    }
    Task& task = *it->second;
    if (RunningLocked(task)) return ConflictError("Task " + std::string(id) + " is currently running");
    if (task.stopped) return FailedPreconditionError("Task " + std::string(id) + " has been stopped");
    task.triggered = true;
  }
  wake_.Notify();
  return Status::Ok();
}

Status LocalTaskWorker::Cancel(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second->unscheduled) {
    return NotFoundError("Task " + std::string(id) + " does not exist");
  }
  Task& task = *it->second;
  if (!RunningLocked(task)) return ConflictError("Task " + std::string(id) + " is not running");
  task.run->stop.request_stop();
  return Status::Ok();
}

std::optional<LocalTaskWorker::Snapshot> LocalTaskWorker::State(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::nullopt;
  return Snapshot{it->second->state, it->second->worker};
}

void LocalTaskWorker::StartWaitLocked(Task& task) {
  const auto [wall, now] = context_.clock->Now();
  task.triggered = false;
  task.served.reset();
  task.state.status = TaskStatus::kIdle;
  task.state.started_at.reset();
  task.state.times_out_at.reset();
  if (task.cadence.initial_delay.has_value()) {
    // A manual task with an initial delay runs once after it, as a global one does (its row starts at
    // now+delay).
    task.next_start = now + *task.cadence.initial_delay;
    task.worker = WorkerStatus::kInitialWait;
    task.state.starts_at = ToWall(*task.next_start, now, wall);
  } else if (task.cadence.kind == CadenceKind::kManual) {
    task.next_start.reset();
    task.worker = WorkerStatus::kIdle;
    task.state.starts_at.reset();
  } else {
    // Backstage's local worker runs once as soon as it starts, whatever the cadence.
    task.next_start = now;
    task.worker = WorkerStatus::kIdle;
    task.state.starts_at = wall;
  }
}

void LocalTaskWorker::ScheduleNextLocked(Task& task, SteadyTime run_started) {
  const auto [wall, now] = context_.clock->Now();
  task.worker = WorkerStatus::kIdle;
  task.triggered = false;
  task.state.status = TaskStatus::kIdle;
  task.state.started_at.reset();
  task.state.times_out_at.reset();
  task.state.starts_at.reset();
  task.next_start.reset();
  if (task.stopped || task.unscheduled) return;
  switch (task.cadence.kind) {
    case CadenceKind::kManual:
      return;
    case CadenceKind::kCron: {
      // Past the occurrence just served too: the steady clock that woke the run may be ahead of the wall
      // clock, and a run ended before its occurrence's wall time must not serve it twice.
      const WallTime after = task.served ? std::max(wall, *task.served) : wall;
      task.served.reset();
      Result<WallTime> next = task.cadence.NextCronAfter(after);
      if (!next.ok()) {
        context_.Log(LogLevel::kWarn, "Task " + plugin_id_ + "/" + task.id +
                                          " has no next cron occurrence, " + next.status().message());
        return;
      }
      task.next_start = now + std::chrono::duration_cast<SteadyTime::duration>(*next - wall);
      task.state.starts_at = *next;
      return;
    }
    case CadenceKind::kDuration:
      // Counted from the start of the previous run; an overrun starts the next one at once.
      task.next_start = std::max(now, run_started + task.cadence.period);
      task.state.starts_at = ToWall(*task.next_start, now, wall);
      return;
  }
}

void LocalTaskWorker::StartRunLocked(Task& task) {
  const auto [wall, now] = context_.clock->Now();
  auto run = std::make_unique<ActiveRun>();
  run->started = now;
  if (task.cadence.timeout.has_value()) run->deadline = now + *task.cadence.timeout;
  ActiveRun* raw = run.get();
  try {
    run->thread = std::thread([this, t = &task, raw, fn = task.fn] { RunThread(t, raw, fn); });
  } catch (const std::system_error& e) {
    context_.Log(LogLevel::kWarn,
                 "Task worker failed unexpectedly, " + plugin_id_ + "/" + task.id + ", " + e.what());
    task.next_start = now + kRetryAfterFailure;
    return;
  }
  task.run = std::move(run);
  // A cron task's starts_at is the occurrence its wait was for.
  task.served =
      task.triggered || task.cadence.kind != CadenceKind::kCron ? std::nullopt : task.state.starts_at;
  task.triggered = false;
  task.next_start.reset();
  task.worker = WorkerStatus::kRunning;
  task.state.status = TaskStatus::kRunning;
  task.state.starts_at.reset();
  task.state.started_at = wall;
  task.state.times_out_at.reset();
  if (task.cadence.timeout.has_value()) {
    task.state.times_out_at = wall + std::chrono::duration_cast<WallTime::duration>(*task.cadence.timeout);
  }
}

void LocalTaskWorker::RunThread(Task* task, ActiveRun* run, TaskFunction fn) {
  RunOutcome outcome;
  {
    std::stop_callback on_shutdown(context_.shutdown, [run] { run->stop.request_stop(); });
    outcome = context_.metrics->Run(fn, run->stop.get_token(), *context_.clock, plugin_id_, task->id,
                                    TaskScope::kLocal);
  }
  {
    std::lock_guard lock(mu_);
    task->state.last_run_ended_at = context_.clock->WallNow();
    if (outcome.error.has_value()) {
      // Like Backstage's local worker, the error is recorded but not logged.
      task->state.last_run_error = SerializeErrorMessage(*outcome.error);
    } else {
      task->state.last_run_error.reset();
    }
    ScheduleNextLocked(*task, run->started);
    run->done = true;
  }
  wake_.Notify();
}

void LocalTaskWorker::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::unique_ptr<ActiveRun>> finished;
    const SteadyTime now = context_.clock->SteadyNow();
    SteadyTime wake_at = now + kMaxSleep;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, task_ptr] : tasks_) {
        Task& task = *task_ptr;
        if (task.run != nullptr && task.run->done) finished.push_back(std::move(task.run));
        if (task.signal_fired != nullptr && task.signal_fired->load() && !task.stopped) {
          task.stopped = true;
          task.next_start.reset();
          if (RunningLocked(task)) task.run->stop.request_stop();
          context_.Log(LogLevel::kInfo, "Task worker finished: " + plugin_id_ + "/" + task.id);
        }
        if (RunningLocked(task)) {
          ActiveRun& run = *task.run;
          if (run.deadline.has_value() && !run.deadline_fired) {
            if (now >= *run.deadline) {
              run.deadline_fired = true;
              run.stop.request_stop();
            } else {
              wake_at = std::min(wake_at, *run.deadline);
            }
          }
          continue;
        }
        if (task.stopped || task.unscheduled) continue;
        if (task.triggered || (task.next_start.has_value() && now >= *task.next_start)) {
          StartRunLocked(task);
          if (task.run != nullptr && task.run->deadline.has_value()) {
            wake_at = std::min(wake_at, *task.run->deadline);
          } else if (task.next_start.has_value()) {
            wake_at = std::min(wake_at, *task.next_start);
          }
        } else if (task.next_start.has_value()) {
          wake_at = std::min(wake_at, *task.next_start);
        }
      }
    }
    for (auto& run : finished) run->thread.join();
    finished.clear();
    context_.clock->WaitUntil(wake_at, stop, &wake_);
  }
}

void LocalTaskWorker::Join() {
  std::thread dispatcher;
  {
    std::lock_guard lock(mu_);
    joined_ = true;
    dispatcher = std::move(dispatcher_);
  }
  if (dispatcher.joinable()) dispatcher.join();
  // The dispatcher is gone, so nothing starts new runs.
  StopAndJoinRuns(mu_, tasks_);
}

}  // namespace octop::runtime
