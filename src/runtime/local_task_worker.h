// LocalTaskWorker: every local-scope task of one plugin, run in memory on this node (docs/scheduler.md,
// "Local tasks"), never touching the database.
//
// One dispatcher thread sleeps until the earliest due time among the plugin's local tasks (or a trigger) and
// starts runs; each run gets a thread of its own that exists only while the run is active. A task's runs are
// sequential, so they never overlap on this node. Fixes two weaknesses of Backstage's LocalTaskWorker: a
// manual task waits until it is triggered (instead of running about once a second), and re-scheduling an id
// with another cadence takes effect.
//
// Timing reads the SchedulerContext's clock only (steady time for waits, wall time for cron and the reported
// timestamps), so tests drive it with a FakeClock.
//
// Ownership: owned by its PluginSchedulerImpl; Task objects live until the worker is destroyed (they are
// never erased, so run threads can point at them). Thread-safety: all public methods may be called from any
// thread.
#ifndef OCTOP_RUNTIME_LOCAL_TASK_WORKER_H_
#define OCTOP_RUNTIME_LOCAL_TASK_WORKER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <octop/scheduler.h>

#include "runtime/scheduler_context.h"
#include "runtime/task_cadence.h"

namespace octop::runtime {

class LocalTaskWorker {
 public:
  LocalTaskWorker(const SchedulerContext& context, std::string plugin_id);
  ~LocalTaskWorker();  // Join()
  LocalTaskWorker(const LocalTaskWorker&) = delete;
  LocalTaskWorker& operator=(const LocalTaskWorker&) = delete;

  // Registers a task, or replaces the definition of a registered one (a run in progress finishes with the old
  // function; the next wait follows the new cadence). Starts the dispatcher on first use.
  void Schedule(const std::string& id, TaskSettingsV2 settings, TaskCadence cadence, TaskFunction fn,
                std::optional<std::stop_token> signal);
  // Stops scheduling the task here (its scope changed); a run in progress finishes.
  void Unschedule(std::string_view id);
  // Whether `id` is a scheduled local task of this worker.
  bool Has(std::string_view id) const;

  // Conflict "Task <id> is currently running" while it runs; otherwise the run starts at once.
  Status Trigger(std::string_view id);
  // Conflict "Task <id> is not running" when idle; otherwise the run's stop_token fires.
  Status Cancel(std::string_view id);

  struct Snapshot {
    TaskState task_state;
    WorkerStatus worker_state = WorkerStatus::kIdle;
  };
  std::optional<Snapshot> State(std::string_view id) const;

  // Waits for the dispatcher and every run to end. REQUIRES: the context's shutdown stop was requested.
  void Join();

 private:
  struct ActiveRun {
    std::stop_source stop;
    SteadyTime started;
    std::optional<SteadyTime> deadline;  // the timeout
    bool deadline_fired = false;
    bool done = false;  // the run thread has recorded the outcome; join and discard
    std::thread thread;
  };
  struct Task {
    std::string id;
    TaskSettingsV2 settings;
    TaskCadence cadence;
    TaskFunction fn;
    bool unscheduled = false;
    bool stopped = false;  // the task's own signal fired: no more runs
    std::shared_ptr<std::atomic<bool>> signal_fired;
    std::unique_ptr<std::stop_callback<std::function<void()>>> signal_callback;
    WorkerStatus worker = WorkerStatus::kIdle;
    TaskState state;
    std::optional<SteadyTime> next_start;  // nullopt: wait for a trigger
    std::optional<WallTime> served;        // kCron: the occurrence the current run serves (none if triggered)
    bool triggered = false;
    std::unique_ptr<ActiveRun> run;
  };

  void Loop(std::stop_token stop);
  void RunThread(Task* task, ActiveRun* run, TaskFunction fn);
  // Sets the first wait of a (re-)registered task: the initial delay, or due now (manual: wait for a
  // trigger).
  void StartWaitLocked(Task& task);
  // After a run: the wait until the next one, per the cadence.
  void ScheduleNextLocked(Task& task, SteadyTime run_started);
  void StartRunLocked(Task& task);
  bool RunningLocked(const Task& task) const { return task.run != nullptr && !task.run->done; }

  const SchedulerContext& context_;
  const std::string plugin_id_;
  WakeSignal wake_;

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Task>, std::less<>> tasks_;  // guarded by mu_
  std::thread dispatcher_;                                           // guarded by mu_ (started once)
  bool joined_ = false;                                              // guarded by mu_
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_LOCAL_TASK_WORKER_H_
