// The octop scheduler: Backstage's backend scheduler (coreServices.scheduler) in C++.
//
// A Scheduler owns one PluginScheduler per plugin id. A plugin schedules tasks -- a function run on a cadence
// (cron, fixed rate, or only when triggered) with a timeout -- in one of two scopes:
//   global  at most one run at a time across every node sharing the database: nodes claim a run with a
//           ticket in the plugin's backstage_backend_tasks__tasks row, so the row is the single source of
//           truth;
//   local   in memory on this node only, never overlapping with itself here; other nodes run their own
//           copy.
// TriggerTask / CancelTask / GetTaskStates are what the REST API serves. docs/scheduler.md describes the
// design.
//
// Ownership: the Scheduler owns its plugins, their stores (one per plugin namespace, opened lazily from one
// URL and migrated once), and every thread (pollers, listeners, janitor, local dispatchers, runs). A
// PluginScheduler reference stays valid until the Scheduler is destroyed. Task functions are copied into the
// scheduler.
//
// Threads: there is no thread per registered task. Per plugin, one poller thread serves all global tasks (one
// readiness query per poll for all of them, plus the janitor and run supervision), one listener thread turns
// database notifications (a trigger on any node) into immediate wake-ups, and one dispatcher thread serves
// all local tasks. A run executes on a thread that exists only while the run is active.
//
// A task function receives a std::stop_token and must return soon after a stop is requested: on timeout, on
// cancellation, when its ticket is lost, on the task's own signal, and on Shutdown(). A function that throws
// counts as a failed run; std::exception::what() becomes the stored error message.
//
// Thread-safety: every method of Scheduler and PluginScheduler may be called from any thread concurrently,
// including from inside a task function (except Shutdown(), which waits for the functions to return).
#ifndef OCTOP_SCHEDULER_H_
#define OCTOP_SCHEDULER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <octop/clock.h>
#include <octop/cron.h>
#include <octop/duration.h>
#include <octop/logger.h>
#include <octop/plugin_division.h>
#include <octop/postgres_pooling.h>
#include <octop/status.h>
#include <octop/task_settings.h>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace octop {

namespace runtime {
struct SchedulerOpener;  // internal: a scheduler on stores of the caller's (tests, benchmarks)
}  // namespace runtime

// ---- Defining a task --------------------------------------------------------------------------------------

// {cron: "..."}: a cron expression in the dialect of the npm `cron` package (5 or 6 fields), evaluated in
// `time_zone` (an IANA name; absent = the node's local zone, as Backstage does). The zone is stored in the
// settings as octop's "timeZone" extension, so every node evaluates a global cron task the same way; likewise
// `dst_policy` (absent = the package's walk, as Backstage) as "dstPolicy".
struct CronFrequency {
  std::string cron;
  std::optional<std::string> time_zone;
  std::optional<DstPolicy> dst_policy;
};
// {trigger: "manual"}: runs only when triggered.
struct ManualTrigger {};
// A Duration: a fixed rate (global: anchored to the planned start, no catch-up burst; local: counted from the
// start of the previous run).
using TaskFrequency = std::variant<CronFrequency, Duration, ManualTrigger>;

enum class TaskScope { kGlobal, kLocal };
std::string_view TaskScopeName(TaskScope scope);  // "global" | "local"

// When and how long a task runs (Backstage's SchedulerServiceTaskScheduleDefinition).
struct TaskScheduleDefinition {
  TaskFrequency frequency;
  Duration timeout;  // required, > 0: the run's stop_token fires after it
  std::optional<Duration>
      initial_delay;  // per node: this node waits this long after registering before it runs
  TaskScope scope = TaskScope::kGlobal;
};

using TaskFunction = std::function<void(std::stop_token)>;

// What runs (Backstage's SchedulerServiceTaskInvocationDefinition).
struct TaskInvocationDefinition {
  std::string id;  // non-empty after trimming, at most 255 bytes
  TaskFunction fn;
  // When this stop is requested the task stops for good on this node: no more runs, and the current run's
  // stop_token fires.
  std::optional<std::stop_token> signal;
};

// Both halves together: what ScheduleTask takes.
struct TaskDefinition {
  std::string id;
  TaskFrequency frequency;
  Duration timeout;
  std::optional<Duration> initial_delay;
  TaskScope scope = TaskScope::kGlobal;
  TaskFunction fn;
  std::optional<std::stop_token> signal;

  static TaskDefinition Of(const TaskScheduleDefinition& schedule, TaskInvocationDefinition invocation);
};

// The settings JSON of a schedule, as Backstage's parseDuration builds it: cron text verbatim, "manual", or
// the duration's luxon ISO form ({milliseconds: 5000} -> "PT5S"); timeout and initial delay in ISO form; the
// cron's time zone as "timeZone". InvalidArgument for an invalid cron expression, an unknown time zone, a
// zero duration frequency or a zero timeout.
Result<TaskSettingsV2> TaskSettingsFromSchedule(const TaskScheduleDefinition& schedule);

// ---- What a scheduler reports -----------------------------------------------------------------------------

// One entry of getScheduledTasks().
struct TaskDescriptor {
  std::string id;
  TaskScope scope = TaskScope::kGlobal;
  TaskSettingsV2 settings;
  friend bool operator==(const TaskDescriptor&, const TaskDescriptor&) = default;
};

enum class TaskStatus { kIdle, kRunning };
std::string_view TaskStatusName(TaskStatus status);  // "idle" | "running"

// The REST API's taskState (for global tasks read from the database, so it reflects the whole
// cluster; for local tasks, this node's memory). Fields that do not apply are absent.
struct TaskState {
  TaskStatus status = TaskStatus::kIdle;
  std::optional<WallTime> starts_at;     // idle: when the next run is due (absent: manual, not triggered)
  std::optional<WallTime> started_at;    // running
  std::optional<WallTime> times_out_at;  // running, with a timeout
  std::optional<WallTime> last_run_ended_at;  // any
  std::optional<std::string> last_run_error;  // any: the raw serialized-error JSON text
  friend bool operator==(const TaskState&, const TaskState&) = default;
};

enum class WorkerStatus { kInitialWait, kIdle, kRunning };
std::string_view WorkerStatusName(WorkerStatus status);  // "initial-wait" | "idle" | "running"

// One element of GET /.backstage/scheduler/v1/tasks, in registration order.
struct TaskStateEntry {
  std::string task_id;
  std::string plugin_id;
  TaskScope scope = TaskScope::kGlobal;
  TaskSettingsV2 settings;
  std::optional<TaskState> task_state;       // null: a global task whose row is gone
  std::optional<WorkerStatus> worker_state;  // this node's worker; running only while this node runs it
};

// ---- The per-plugin API -----------------------------------------------------------------------------------

class TaskRunner;

// Backstage's SchedulerService for one plugin. Implemented by the real scheduler and by
// testing::MockScheduler.
class PluginScheduler {
 public:
  virtual ~PluginScheduler() = default;

  virtual const std::string& plugin_id() const = 0;

  // Registers a task and starts running it. InvalidArgument for a bad id, cron, zone or duration. Global:
  // opens and migrates the plugin's store on first use and upserts the task's row ("Failed to persist task,
  // <error>" on failure, nothing is registered). Scheduling an id again replaces its definition in place: the
  // new settings and function apply from the next run, and runs of the old and new definition never overlap
  // on this node.
  virtual Status ScheduleTask(TaskDefinition task) = 0;

  // Makes a task run now. A local task of this node: Conflict "Task <id> is currently running" while it runs.
  // Otherwise through the database (any node may run it): NotFound "Task <id> does not exist", Conflict "Task
  // <id> is currently running".
  virtual Status TriggerTask(std::string_view id) = 0;

  // Requests the current run to stop. A local task of this node: Conflict "Task <id> is not running" when
  // idle. Otherwise through the database: NotFound "Task <id> does not exist", Conflict "Task <id> is not
  // running"; the run is marked ended with the error "Task was cancelled" and the node running it stops it.
  virtual Status CancelTask(std::string_view id) = 0;

  // Every task scheduled through this object, once per id, in first-registration order, with its latest
  // settings.
  virtual std::vector<TaskDescriptor> GetScheduledTasks() const = 0;

  // What the REST API's GET shows for each scheduled task. One database read for all global tasks;
  // Unavailable when it fails. Local-only plugins do not touch the database.
  virtual Result<std::vector<TaskStateEntry>> GetTaskStates() = 0;

  // Backstage's createScheduledTaskRunner: Run(invocation) schedules the invocation with this schedule.
  TaskRunner CreateScheduledTaskRunner(TaskScheduleDefinition schedule);
};

class TaskRunner {
 public:
  TaskRunner(PluginScheduler& scheduler, TaskScheduleDefinition schedule)
      : scheduler_(&scheduler), schedule_(std::move(schedule)) {}
  Status Run(TaskInvocationDefinition invocation) const;

 private:
  PluginScheduler* scheduler_;
  TaskScheduleDefinition schedule_;
};

// ---- The scheduler ----------------------------------------------------------------------------------------

struct SchedulerOptions {
  // Where the plugins' tables live: "sqlite:<directory>" (one file per plugin), "sqlite::memory:" or
  // "postgresql://..." (placed by plugin_division). Default "sqlite:." (the working directory).
  std::string database_url = "sqlite:.";
  // On PostgreSQL: a database per plugin (Backstage's default) or a schema per plugin, as Backstage's
  // backend.database settings (docs/store.md, "Sharing a database with Backstage").
  PluginDivision plugin_division;
  // On PostgreSQL behind a pooler in transaction mode: no prepared statements, LISTEN elsewhere
  // (octop/postgres_pooling.h).
  PostgresPooling pooling;
  // Time source for every wait and timestamp, and for the database's "now" in tests. Default: the real clock.
  // Must outlive the Scheduler.
  Clock* clock = &Clock::Real();
  // How often a running global task checks that its ticket is still valid, and the longest wait between two
  // readiness polls (lowered to the shortest duration cadence of the plugin's global tasks, not below 100
  // ms). Default 5 s (Backstage's DEFAULT_WORK_CHECK_FREQUENCY).
  std::chrono::milliseconds work_check_frequency{5000};
  // The longest wait between two readiness polls; default (nullopt) = work_check_frequency.
  std::optional<std::chrono::milliseconds> poll_interval;
  // How often each plugin's janitor frees runs whose timeout expired (the first sweep runs when the store
  // opens). Default 1 minute. Zero disables the janitor.
  std::chrono::milliseconds janitor_interval{60000};
  // Log sink; default: spdlog's default logger.
  Logger logger;
  // Where run metrics are registered; default: a registry of the scheduler's own (see metrics_registry()).
  std::shared_ptr<prometheus::Registry> metrics_registry;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});
  ~Scheduler();  // Shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The scheduler of one plugin, created on first use. The reference lives as long as the Scheduler.
  PluginScheduler& ForPlugin(const std::string& plugin_id);
  // nullptr when ForPlugin(plugin_id) was never called.
  PluginScheduler* FindPlugin(std::string_view plugin_id);
  // Every plugin id ForPlugin was called with, in that order.
  std::vector<std::string> PluginIds() const;

  // Requests stop on every run's stop_token and every loop, waits for the task functions to return (they must
  // cooperate), releases this node's global runs in the database, and joins every thread. Idempotent.
  // Afterwards ScheduleTask returns FailedPrecondition.
  void Shutdown();

  // The run metrics: backend_tasks_task_runs_count{taskId,scope,result,plugin},
  // backend_tasks_task_runs_duration (histogram, seconds), backend_tasks_task_runs_started / _completed
  // (epoch-second gauges).
  std::shared_ptr<prometheus::Registry> metrics_registry() const;

  class Impl;

 private:
  friend struct runtime::SchedulerOpener;
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace octop

#endif  // OCTOP_SCHEDULER_H_
