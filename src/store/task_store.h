// TaskStore: a Backstage plugin's task table, `backstage_backend_tasks__tasks`, one named method per
// operation (see store/store.h for what every store shares, docs/store.md for the SQL).
//
// A task store's namespace holds Backstage's table and knex's bookkeeping and nothing else: its migration
// line is Backstage's own knex migrations, recorded under their file names in
// backstage_backend_tasks__knex_migrations, so a database migrated by a Backstage backend is recognised, and
// the other way round. Task ids need only be unique within a plugin, as in Backstage.
//
// Preconditions (ids, tickets, settings) are checked above the backends; TaskStoreWrapper forwards every call
// to another TaskStore, for decorators and test doubles that change a few.
//
// Thread-safety: as store/store.h says.
#ifndef OCTOP_STORE_TASK_STORE_H_
#define OCTOP_STORE_TASK_STORE_H_

#include <chrono>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/store.h"

namespace octop::store {

// ---- Time as the database computes it ---------------------------------------------------------------------

// SQL NULL.
struct NullTime {};
// The database's now() plus `offset` (0 = now). Used for "due now" and "now + cadence/initial delay/timeout".
struct DbNowPlus {
  std::chrono::microseconds offset{0};
};
// A fixed instant computed by the caller (e.g. the next cron occurrence).
struct AbsoluteTime {
  WallTime at;
};
// Release only: greatest(previous next_run_start_at + period, now()) -- a fixed rate anchored to the planned
// start, never in the past, so there is no catch-up burst after downtime -- and never later than now() +
// period, which a previous value in the future (the wall clock stepped back) would give. A NULL previous
// value counts as now().
struct FixedRateAfter {
  std::chrono::microseconds period{0};
};
using TimeSpec = std::variant<NullTime, DbNowPlus, AbsoluteTime, FixedRateAfter>;

// ---- Rows -------------------------------------------------------------------------------------------------

// One row of backstage_backend_tasks__tasks, as stored.
struct TaskRow {
  std::string id;
  std::string settings_json;
  std::optional<WallTime> next_run_start_at;
  std::optional<std::string> current_run_ticket;
  std::optional<WallTime> current_run_started_at;
  std::optional<WallTime> current_run_expires_at;
  std::optional<std::string> last_run_error_json;
  std::optional<WallTime> last_run_ended_at;
};

// ---- Params and results, one pair per operation -----------------------------------------------------------

// Register a global task (Backstage persistTask). Inserts {id, settings_json, next_run_start_at = start_at};
// on an existing row replaces settings_json and moves next_run_start_at to next_start_at only if that is
// earlier -- or if the stored value is NULL and next_start_at is not (a task switched from manual to a timed
// cadence starts running). current_run_* and last_run_* are never touched. settings_json must be valid
// TaskSettingsV2 JSON.
struct UpsertTaskParams {
  std::string id;
  std::string settings_json;
  TimeSpec start_at;       // NullTime, DbNowPlus or AbsoluteTime
  TimeSpec next_start_at;  // NullTime, DbNowPlus or AbsoluteTime
};

// One readiness query for many tasks (the per-node state poll).
struct PollTasksParams {
  std::vector<std::string> ids;
};
struct PolledTask {
  std::string id;
  std::string settings_json;
  bool ready = false;    // next_run_start_at <= now AND current_run_ticket IS NULL
  bool running = false;  // current_run_ticket IS NOT NULL
  std::optional<WallTime> next_run_start_at;
  std::optional<WallTime> current_run_expires_at;
};
struct PollTasksResult {
  WallTime db_now;                // the database's now() at the time of the query
  std::vector<PolledTask> tasks;  // ids with no row are absent
};

// Claim a due task: sets the ticket, started_at = now, expires_at = now + timeout (NULL without a timeout),
// only if current_run_ticket IS NULL and next_run_start_at <= now. Exactly one concurrent claimer wins.
struct ClaimTaskParams {
  std::string id;
  std::string ticket;
  std::optional<std::chrono::microseconds> timeout;
};
struct ClaimedRun {
  WallTime started_at;
  std::optional<WallTime> expires_at;
  // next_run_start_at when the claim won: the due time this run serves (a claim does not change it).
  std::optional<WallTime> due_at;
};

// Is `ticket` still the task's current ticket? (the liveness check; read-only unless extend_lease is set)
struct CheckTaskTicketParams {
  std::string id;
  std::string ticket;
  // Set while the owner stops its own timed-out run: the run's expiry moves to at least now + extend_lease,
  // so no janitor frees the task while its process may still live (docs/scheduler.md, "Timeouts").
  std::optional<std::chrono::microseconds> extend_lease;
};

// End a run we own: clears current_run_*, sets last_run_ended_at = now, last_run_error_json = error_json
// (NULL on success) and next_run_start_at = next_run -- only where current_run_ticket = ticket (a fencing
// token).
struct ReleaseTaskParams {
  std::string id;
  std::string ticket;
  TimeSpec next_run;
  std::optional<std::string> error_json;
};

// Make a task due now. NotFound "Task <id> does not exist"; Conflict "Task <id> is currently running". Wakes
// listeners of kTasksChannel with the id as payload.
struct TriggerTaskParams {
  std::string id;
};

// Stop the current run: clears current_run_*, sets last_run_ended_at = now and last_run_error_json =
// error_json. NotFound "Task <id> does not exist"; Conflict "Task <id> is not running". next_run_start_at is
// not changed unless next_run is given: then it is set as by a release (NullTime, DbNowPlus, AbsoluteTime or
// FixedRateAfter), so that a cancelled manual task is not claimable again at once (Backstage's cancel writes
// the next run too).
struct CancelTaskParams {
  std::string id;
  std::string error_json;            // the serialized Error("Task was cancelled")
  std::optional<TimeSpec> next_run;  // absent: next_run_start_at unchanged
};

// A task that is not running and whose next_run_start_at lies more than `within` after now() is moved to
// now()
// + within; returns whether it moved. After the wall clock steps back, a duration task's stored next run lies
// as far in the future as the step; its cadence bounds it (docs/reliability.md, "Clock steps").
struct CapTaskNextRunParams {
  std::string id;
  std::chrono::microseconds within{0};
};

// The janitor: clears current_run_* of every run whose current_run_expires_at < now. Returns the ids. With
// error_json, each swept run is also recorded as ended now with that error (a lost run then reads as failed,
// not as a clean idle task); without it the result columns are left alone. expired_before bounds "now" as in
// RescueExpiredJobsParams.
struct SweepExpiredTaskRunsParams {
  std::optional<std::string> error_json;
  std::optional<WallTime> expired_before;
};

struct ListTasksParams {
  std::optional<std::vector<std::string>> ids;  // all rows when absent
};

// ---- Migrations -------------------------------------------------------------------------------------------

// Backstage's knex migrations, in order; SchemaVersion() counts the applied ones.
inline constexpr std::string_view kTaskMigrationNames[] = {
    "20210928160613_init.js",               // backstage_backend_tasks__tasks, next_run_start_at NOT NULL
    "20240712211735_nullable_next_run.js",  // next_run_start_at becomes nullable (manual tasks)
    "20250411000000_last_run.js",           // + last_run_error_json, last_run_ended_at
};
inline constexpr int kLatestTaskSchemaVersion = static_cast<int>(std::size(kTaskMigrationNames));

// ---- The interface ----------------------------------------------------------------------------------------

class TaskStore : public Store {
 public:
  // How many sessions of a Backstage backend use this namespace's tables now: on PostgreSQL, connections to
  // its database named as Backstage names them (`backstage_plugin_<id>`); 0 for a namespace that is not a
  // plugin's, and on SQLite, where it cannot be told. For the timeZone warning (docs/scheduler.md, "Sharing
  // tasks with Backstage").
  virtual Result<int> CountBackstageSessions() = 0;

  // kInvalidArgument for an id ValidateTaskId refuses, settings that are not TaskSettingsV2, or a
  // FixedRateAfter time.
  virtual Status UpsertTask(const UpsertTaskParams& params) = 0;
  virtual Result<PollTasksResult> PollTasks(const PollTasksParams& params) = 0;
  // nullopt when another claimer holds the task, it is not due, or its row is gone. kInvalidArgument for an
  // empty ticket.
  virtual Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) = 0;
  virtual Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) = 0;
  // false when the ticket no longer matches (stolen, cancelled, reclaimed) or the row is gone.
  virtual Result<bool> TryReleaseTask(const ReleaseTaskParams& params) = 0;
  virtual Status TriggerTask(const TriggerTaskParams& params) = 0;
  virtual Status CancelTask(const CancelTaskParams& params) = 0;
  virtual Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) = 0;
  virtual Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) = 0;
  virtual Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) = 0;
};

// Forwards every call to `target` (owned); a decorator overrides what it changes.
class TaskStoreWrapper : public ForwardingStore<TaskStore> {
 public:
  using ForwardingStore::ForwardingStore;

  Result<int> CountBackstageSessions() override { return target().CountBackstageSessions(); }
  Status UpsertTask(const UpsertTaskParams& params) override { return target().UpsertTask(params); }
  Result<PollTasksResult> PollTasks(const PollTasksParams& params) override {
    return target().PollTasks(params);
  }
  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    return target().TryClaimTask(params);
  }
  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    return target().CheckTaskTicket(params);
  }
  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    return target().TryReleaseTask(params);
  }
  Status TriggerTask(const TriggerTaskParams& params) override { return target().TriggerTask(params); }
  Status CancelTask(const CancelTaskParams& params) override { return target().CancelTask(params); }
  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    return target().CapTaskNextRun(params);
  }
  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    return target().SweepExpiredTaskRuns(params);
  }
  Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) override {
    return target().ListTasks(params);
  }
};

// Opens a plugin's (or a test's) task store from a URL (store/store.h lists the forms), its preconditions
// checked above the backend. Does not migrate.
Result<std::unique_ptr<TaskStore>> OpenTaskStore(const std::string& url, const StoreOptions& options = {});

// NotFound "Task <id> does not exist" (Backstage's message).
Status NoSuchTask(std::string_view id);

// Validates a task id before any write: non-empty after trimming, at most 255 bytes (the column is
// varchar(255)), valid UTF-8. InvalidArgument "<id> is not a valid ID, expected non-empty string"
// (Backstage's message) or a message naming the limit.
Status ValidateTaskId(std::string_view id);

}  // namespace octop::store

#endif  // OCTOP_STORE_TASK_STORE_H_
