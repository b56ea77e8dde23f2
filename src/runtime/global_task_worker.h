// GlobalTaskWorker: every global-scope task of one plugin on this node (docs/scheduler.md, "Global tasks"),
// coordinated with the other nodes through the plugin's Store.
//
// Threads (none per task):
// - poller: one readiness query (PollTasks) for all of the plugin's waiting tasks, then a claim per ready
//   task. It sleeps until the earliest of: the poll interval, the earliest next_run_start_at among the
//   waiting tasks (translated from database time to this node's steady clock by its reading of the
//   database's clock, DatabaseClock), an initial delay ending, a run's timeout or liveness check, the
//   janitor. It also runs the janitor and supervises this node's runs: the timeout requests stop, and every
//   work_check_frequency a CheckTaskTicket stops a run whose ticket was cleared (cancelled, reclaimed).
// - listener: turns kTasksChannel notifications (a trigger on any node) into an immediate poll.
// - runs: one thread per active run: calls the function, then releases the row with the next run time
//   computed from the settings stored in the database (cron: the next occurrence after the database's now;
//   duration: fixed rate after the planned start; manual: NULL) and the serialized error.
// A failed database call is logged and retried after a second; the loops never crash. A task whose row is
// gone or whose stored settings do not parse stops on this node, as Backstage's worker does.
//
// Ownership: owned by its PluginSchedulerImpl; borrows the Store (owned by the same PluginSchedulerImpl,
// destroyed after this). Thread-safety: all public methods may be called from any thread.
#ifndef OCTOP_RUNTIME_GLOBAL_TASK_WORKER_H_
#define OCTOP_RUNTIME_GLOBAL_TASK_WORKER_H_

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

#include "runtime/database_clock.h"
#include "runtime/scheduler_context.h"
#include "runtime/task_cadence.h"
#include "store/task_store.h"

namespace octop::runtime {

class GlobalTaskWorker {
 public:
  // `db_now` is the database's clock read by a query started at `before`, when the store was opened (the
  // first estimate of the database's clock).
  GlobalTaskWorker(const SchedulerContext& context, std::string plugin_id, store::TaskStore& store,
                   ClockReading before, WallTime db_now);
  ~GlobalTaskWorker();  // Join()
  GlobalTaskWorker(const GlobalTaskWorker&) = delete;
  GlobalTaskWorker& operator=(const GlobalTaskWorker&) = delete;

  // Starts the poller and listener threads.
  void Start();

  // Registers a task whose row the caller has just upserted, or replaces the definition of a registered one
  // (a run in progress finishes with the old function).
  void Schedule(const std::string& id, TaskSettingsV2 settings, TaskCadence cadence, TaskFunction fn,
                std::optional<std::stop_token> signal);
  // Stops scheduling the task here (its scope changed); a run in progress finishes.
  void Unschedule(std::string_view id);

  // A trigger of `id` was made (here or, through a notification, on another node): this node ends its initial
  // wait for the task and polls at once.
  void NoteTriggered(std::string_view id);
  // `id`'s run was cancelled in the database: if this node runs it, its stop_token fires now (other nodes
  // notice at their next liveness check).
  void NoteCancelled(std::string_view id);

  std::optional<WorkerStatus> WorkerState(std::string_view id) const;
  // The database's now, estimated from this node's clock and the offset measured by the last poll.
  WallTime DatabaseNowEstimate() const;

  // Waits for the loops and every run (runs are released in the database). REQUIRES: shutdown was requested.
  void Join();

 private:
  struct ActiveRun {
    std::string ticket;
    TaskCadence
        db_cadence;  // from the row's settings: timeout and next run follow the database, as Backstage
    std::optional<WallTime> due_at;  // ClaimedRun::due_at: the occurrence the release moves past
    std::stop_source stop;
    std::optional<SteadyTime> deadline;  // the timeout
    bool deadline_fired = false;
    // The task function has returned (its process, if any, is gone); only the release may still be pending.
    std::atomic<bool> fn_returned{false};
    SteadyTime next_check;  // the next liveness check
    bool done = false;      // released (or given up); join and discard
    std::thread thread;
  };
  struct Task {
    std::string id;
    TaskSettingsV2 settings;
    TaskCadence cadence;
    TaskFunction fn;
    bool unscheduled = false;
    bool stopped = false;  // the task's signal fired, or the worker aborted (row gone, settings unreadable)
    std::shared_ptr<std::atomic<bool>> signal_fired;
    std::unique_ptr<std::stop_callback<std::function<void()>>> signal_callback;
    std::optional<SteadyTime> initial_wait_until;  // set while in the per-node initial wait
    std::unique_ptr<ActiveRun> run;
  };
  struct TicketCheck {
    std::string id;
    std::string ticket;
    // Its timeout fired and the task function has not returned yet: the check also extends the lease. Once it
    // has returned, a release that keeps failing must not keep the row from the janitor.
    bool stopping = false;
  };

  void PollLoop(std::stop_token stop);
  void ListenLoop(std::stop_token stop);
  void RunThread(Task* task, ActiveRun* run, TaskFunction fn);
  // One poll and the claims it leads to; returns when the next poll is due.
  SteadyTime PollAndClaim(const std::vector<std::string>& ids, std::chrono::milliseconds interval);
  void TryClaim(const std::string& id, const store::PolledTask& row);
  void Sweep();
  // Reads the database's clock; returns its step since the last reading, if it stepped.
  std::optional<std::chrono::nanoseconds> ReadDatabaseClock();
  // After a step of the database's clock: renews the leases of this node's runs from the database's now.
  void OnClockStep(std::chrono::nanoseconds step);
  // A duration task whose next run lies further ahead than its cadence allows (the wall clock stepped back)
  // is brought to now + its cadence; returns the new distance, or nullopt when nothing moved.
  std::optional<std::chrono::microseconds> CapNextRun(const store::PolledTask& row, WallTime db_now);
  bool RunningLocked(const Task& task) const { return task.run != nullptr && !task.run->done; }
  std::chrono::milliseconds PollIntervalLocked() const;
  void Wake() { wake_.Notify(); }

  const SchedulerContext& context_;
  const std::string plugin_id_;
  store::TaskStore& store_;
  WakeSignal wake_;
  DatabaseClock db_clock_;
  SteadyTime last_reading_;                       // poller thread only: when db_clock_ was last read
  std::optional<std::chrono::nanoseconds> step_;  // poller thread only: a step read and not yet handled
  int early_polls_ = 0;                           // poller thread only
  bool claimed_ = false;                          // poller thread only: the last poll started a run

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Task>, std::less<>> tasks_;  // guarded by mu_
  std::thread poller_;                                               // guarded by mu_
  std::thread listener_;                                             // guarded by mu_
  bool joined_ = false;                                              // guarded by mu_
};

// A fresh random (version 4) UUID, the run ticket.
std::string NewTicket();

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_GLOBAL_TASK_WORKER_H_
