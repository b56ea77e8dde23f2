// Store: everything octop keeps in a relational database, behind one interface with one named method per
// operation.
//
// A Store is bound to one namespace (a Backstage plugin id, or "octop" for the job queue): on PostgreSQL the
// namespace is a schema, on SQLite a database file in the store's directory, so every plugin has its own
// `backstage_backend_tasks__tasks` table and task ids need only be unique within a plugin, as in Backstage.
//
// Implementations: store/sqlite (embedded default) and store/postgres (the cluster backend). Both pass the
// same conformance suite (tests/store_conformance). SQL lives only inside the backends, in .sql files
// embedded at build time. Callers never see SQL, rows from a driver, or backend checks: differences between
// backends are hidden here.
//
// Time: every comparison that decides something across nodes (is a task due, has a run expired) uses the
// database's clock, never the caller's. StoreOptions::clock may replace the database's "now"
// (FakeClock::DatabaseNowOverride) so that tests drive time; in production it is the real clock, whose
// override is nullopt.
//
// Errors: every method returns Status/Result. A lost connection is kUnavailable (the backend reconnects on
// the next call); bad input (an empty or over-long id, settings JSON that does not parse) is kInvalidArgument
// and writes nothing; a missing task is kNotFound and a task in the wrong state kConflict, with Backstage's
// exact messages.
//
// Thread-safety: a Store is safe to use from many threads at once (PostgreSQL: a connection pool; SQLite: a
// connection per thread or a serialized one, with WAL and a busy timeout). Listener objects are used by one
// thread.
#ifndef OCTOP_STORE_STORE_H_
#define OCTOP_STORE_STORE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <octop/clock.h>
#include <octop/job.h>
#include <octop/plugin_division.h>
#include <octop/status.h>
#include <octop/transaction.h>

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

struct DeleteTaskParams {
  std::string id;
};

// ---- Jobs (the Octop job queue: octop_jobs, octop_queues, octop_config; see docs/store.md "Jobs") ---------
//
// The vocabulary (statuses, JobSpec, JobInfo, filters, summaries) is the public one of <octop/job.h>. Job ids
// are UUID v4 text, generated by the store. Times are the database's (StoreOptions::clock override).

// last_error keeps at most this many bytes (cut at a UTF-8 character boundary).
inline constexpr std::size_t kMaxJobErrorBytes = 1024;
// queue, kind, unique_key and config keys: 1..255 bytes of valid UTF-8.
inline constexpr std::size_t kMaxJobNameBytes = 255;

// Take up to `limit` due jobs of `queue`: status pending or failed, scheduled_at <= now, the queue not
// paused, kind in `kinds` (any when empty); ORDER BY priority, scheduled_at, id. Each becomes running with
// attempt + 1, a fresh attempt_token (one per call: the jobs of one claim may share it, every later claim of
// a job gets another), started_at = now, expires_at = now + timeout, worker_id. PostgreSQL: one statement
// with FOR UPDATE SKIP LOCKED (no job goes to two claimers, claimers do not wait for each other); SQLite: one
// statement under the single writer lock.
struct ClaimJobsParams {
  std::string queue = "default";
  int limit = 1;                   // 1..1000
  std::vector<std::string> kinds;  // empty: any kind
  std::chrono::microseconds timeout{std::chrono::minutes(5)};
  std::string worker_id;  // stored in worker_id (diagnostics); may be empty
};

enum class JobOutcome {
  kSuccess,  // -> success, completed_at = now
  kRetry,    // a failed attempt: -> failed with scheduled_at = now + retry_delay, or frozen when out of
             // attempts
  kFail,     // the same as kRetry (the runtime computed the backoff); kept apart for metrics and logs
  kCancel,   // -> frozen now, whatever attempts are left (the handler gave up)
  kRelease,  // the attempt never started (a prefetched job handed back): undoes the claim -- attempt - 1,
             // status pending (attempt 0) or failed, no token, no expiry, no worker, last_error = error
};
// The end of one attempt. Applied only where id and attempt_token match and status = 'running' (fencing:
// after a rescue or a re-claim the old token is stale and the completion is not applied).
struct JobCompletion {
  std::string id;
  std::string attempt_token;
  JobOutcome outcome = JobOutcome::kSuccess;
  std::optional<std::string> error;  // stored in last_error (truncated to kMaxJobErrorBytes); NULL on success
  std::chrono::microseconds retry_delay{0};  // kRetry/kFail: the next attempt is due at now + retry_delay
};

// Running jobs whose expires_at < now (their worker died or hung) become failed (due at now + backoff) or
// frozen when out of attempts, with last_error "Job timed out (worker lost)". backoff = min(backoff_base *
// 2^(attempt-1), backoff_max); the store adds no jitter.
// Attempts whose token is in spare_tokens are never rescued: the caller runs them itself, and knows they are
// alive whatever the clocks say. With expired_before, a lease must also have ended before that instant: the
// caller's estimate of the database's now on its monotonic clock, so that a step of the database's clock the
// caller has not measured yet expires nothing (docs/reliability.md, "Clock steps").
struct RescueExpiredJobsParams {
  std::chrono::microseconds backoff_base{std::chrono::seconds(1)};
  std::chrono::microseconds backoff_max{std::chrono::hours(1)};
  std::vector<std::string> spare_tokens;
  std::optional<WallTime> expired_before;
};

// The owner of running attempts sets their expires_at to now + lease (the tokens' running jobs only); returns
// how many moved. Re-bases the leases after a wall-clock step (docs/reliability.md, "Clock steps").
struct RenewJobLeasesParams {
  std::vector<std::string> tokens;
  std::chrono::microseconds lease{0};
};
struct RescuedJob {
  std::string id;
  JobStatus status = JobStatus::kFailed;  // kFailed (will be retried) or kFrozen
  int attempt = 0;
};

// Manual retry: a failed or frozen job becomes pending, due now; attempt is kept, and max_retries is raised
// to attempt when it was exhausted, so the job gets exactly one more attempt. NotFound "Job <id> does not
// exist"; Conflict "Job <id> is <status>" otherwise, or when another live job holds its unique_key.
struct RetryJobParams {
  std::string id;
};
// Manual cancel: a pending or failed job becomes frozen, last_error "Job was cancelled", completed_at = now.
// NotFound "Job <id> does not exist"; Conflict "Job <id> is currently running" (its worker owns it: the
// runtime stops it through its stop_token and completes it with kCancel) or "Job <id> has already finished"
// (success, frozen).
struct CancelJobParams {
  std::string id;
};
// The latest failed and frozen jobs (the octop_failed_jobs view), most recently failed first.
struct ListFailedJobsParams {
  std::optional<std::string> queue;
  int limit = 10;  // 1..1000
};

struct ConfigEntry {
  std::string key;
  std::string value_json;  // PostgreSQL returns jsonb's normalised text
  WallTime updated_at;
};

// Retention: delete jobs in `statuses` whose completed_at (or, lacking it, created_at) < now - older_than, at
// most `limit` per call (callers loop while the count equals the limit). Returns the number deleted.
struct DeleteFinishedJobsParams {
  std::chrono::microseconds older_than{std::chrono::hours(24 * 7)};
  std::vector<JobStatus> statuses = {JobStatus::kSuccess,
                                     JobStatus::kFrozen};  // only success/frozen accepted
  int limit = 10000;
};

inline constexpr std::string_view kConfigChannel = "octop_config";  // SetConfig notifies with the key

// ---- Notifications ----------------------------------------------------------------------------------------

inline constexpr std::string_view kTasksChannel = "octop_tasks";
inline constexpr std::string_view kJobsChannel = "octop_jobs";

struct Notification {
  std::string channel;
  std::string payload;
};

// A subscription to notifications (PostgreSQL LISTEN/NOTIFY; SQLite: an in-process broker per database file,
// so every Store on the same file in one process sees them). Used by one thread.
class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks until at least one notification is pending, `timeout` passes or `stop` is requested, and returns
  // what is pending (possibly nothing). kUnavailable if the connection broke; the next call reconnects and
  // re-listens.
  virtual Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) = 0;
};

// ---- Schema introspection (migrations, doctor, conformance tests) -----------------------------------------

// Every backend applies these migrations, in this order; SchemaVersion() counts the applied ones. The first
// three are Backstage's knex migrations, recorded under these names in
// backstage_backend_tasks__knex_migrations (so a database migrated by a Backstage backend is recognised, and
// the other way round); the rest are octop's, recorded in octop_migrations.
inline constexpr std::string_view kMigrationNames[] = {
    "20210928160613_init.js",               // backstage_backend_tasks__tasks, next_run_start_at NOT NULL
    "20240712211735_nullable_next_run.js",  // next_run_start_at becomes nullable (manual tasks)
    "20250411000000_last_run.js",           // + last_run_error_json, last_run_ended_at
    "octop_0001_jobs",                      // octop_jobs and its indexes
    "octop_0002_config",                    // octop_config
    "octop_0003_job_queue",  // + worker_id; unique and claim indexes cover 'failed'; octop_queues; the views
};
inline constexpr int kLatestSchemaVersion = static_cast<int>(std::size(kMigrationNames));

// One column of a table, as the database's catalog reports it. `type` is the backend's own spelling of the
// declared type (SQLite: as declared, standard names upper-cased, e.g. "varchar(255)", "TEXT"; PostgreSQL:
// format_type(), e.g. "character varying(255)").
struct ColumnInfo {
  std::string name;
  std::string type;
  bool not_null = false;
  bool primary_key = false;
  friend bool operator==(const ColumnInfo&, const ColumnInfo&) = default;
};

// One index of a table (primary-key indexes included where the catalog lists them).
struct IndexInfo {
  std::string name;
  std::vector<std::string> columns;  // in index order; expression parts are left out
  bool unique = false;
  bool partial = false;  // has a WHERE clause
};

// ---- The interface ----------------------------------------------------------------------------------------

struct StoreOptions {
  // Which plugin's tables: a PostgreSQL schema or an SQLite file name. Default "default".
  std::string ns = "default";
  // Set for a plugin's store: on PostgreSQL `ns` is then a plugin id placed as the division says (its own
  // database, or a prefixed schema). Unset: `ns` is a schema of the URL's database (the job queue, tests).
  std::optional<PluginDivision> plugin_division;
  // Source of the database's "now" override (see the header comment). Default: the real clock (no override).
  const Clock* clock = &Clock::Real();
  // Maximum connections (PostgreSQL). Default 4.
  int pool_size = 4;
  // How long SQLite waits for a lock before kUnavailable. Default 5 s.
  std::chrono::milliseconds busy_timeout{5000};
};

class Store {
 public:
  virtual ~Store() = default;

  // "sqlite" or "postgres".
  virtual std::string_view backend() const = 0;

  // Applies pending migrations (idempotent; safe to call from several nodes at once).
  virtual Status Migrate() = 0;
  // The number of migrations applied to this namespace.
  virtual Result<int> SchemaVersion() = 0;
  // Applies pending migrations up to `version` (1..kLatestSchemaVersion) and no further; never goes down. For
  // upgrade tests (a namespace created at an old version, filled, then migrated) and for staged roll-outs.
  virtual Status MigrateTo(int version) {
    (void)version;
    return FailedPreconditionError("MigrateTo is not supported by this backend");
  }
  // The names (kMigrationNames) of the applied migrations, in order.
  virtual Result<std::vector<std::string>> AppliedMigrations() {
    return FailedPreconditionError("AppliedMigrations is not supported by this backend");
  }
  // The columns of `table` in this namespace, in table order; empty when the table does not exist.
  virtual Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) {
    (void)table;
    return FailedPreconditionError("DescribeTable is not supported by this backend");
  }
  // The indexes of `table` in this namespace, sorted by name; empty when the table does not exist.
  virtual Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) {
    (void)table;
    return FailedPreconditionError("DescribeIndexes is not supported by this backend");
  }
  virtual Result<WallTime> DatabaseNow() = 0;
  // Unavailable, saying why, when a write would fail now: on PostgreSQL a standby (in recovery) or a
  // read-only session; on SQLite a write that fails (read-only file or file system, disk full) or under a
  // megabyte free on its file system. For readiness probes (docs/api.md); on SQLite each call writes the file
  // header's user_version (unused by octop and knex) as 0.
  virtual Status CheckWritable() = 0;
  // How many sessions of a Backstage backend use this namespace's tables now: on PostgreSQL, connections to
  // its database named as Backstage names them (`backstage_plugin_<id>`); 0 for a namespace that is not a
  // plugin's, and on SQLite, where it cannot be told. For the timeZone warning (docs/scheduler.md, "Sharing
  // tasks with Backstage").
  virtual Result<int> CountBackstageSessions() = 0;

  virtual Status UpsertTask(const UpsertTaskParams& params) = 0;
  virtual Result<PollTasksResult> PollTasks(const PollTasksParams& params) = 0;
  // nullopt when another claimer holds the task, it is not due, or its row is gone.
  virtual Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) = 0;
  virtual Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) = 0;
  // false when the ticket no longer matches (stolen, cancelled, reclaimed) or the row is gone.
  virtual Result<bool> TryReleaseTask(const ReleaseTaskParams& params) = 0;
  virtual Status TriggerTask(const TriggerTaskParams& params) = 0;
  virtual Status CancelTask(const CancelTaskParams& params) = 0;
  virtual Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) = 0;
  virtual Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) = 0;
  virtual Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) = 0;
  virtual Status DeleteTask(const DeleteTaskParams& params) = 0;

  virtual Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) = 0;

  // ---- Jobs (see the Jobs section above). Default bodies: not supported by this backend. ----
  // All items in one transaction: all inserted (or found by unique key) or, on any error, none. Notifies
  // kJobsChannel once per distinct queue, payload the queue name, on commit. Result order = input order.
  virtual Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) {
    (void)jobs;
    return FailedPreconditionError("EnqueueJobs is not supported by this backend");
  }
  // Runs fn inside one transaction on one connection; commits when fn returns OK (and every statement
  // succeeded), rolls back otherwise, and returns fn's error (or the commit's). fn must not call this Store
  // (it may wait for the connection it holds). SQLite: BEGIN IMMEDIATE, so fn holds the database's write
  // lock: keep it short.
  virtual Status WithTransaction(const std::function<Status(Transaction&)>& fn) {
    (void)fn;
    return FailedPreconditionError("WithTransaction is not supported by this backend");
  }
  virtual Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) {
    (void)params;
    return FailedPreconditionError("ClaimJobs is not supported by this backend");
  }
  // One transaction for the batch; result[i] = whether completion i was applied (false: stale token, not
  // running, or no such job). Invalid input (an unknown outcome) fails the whole batch before any write.
  virtual Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) {
    (void)completions;
    return FailedPreconditionError("CompleteJobs is not supported by this backend");
  }
  virtual Result<std::vector<RescuedJob>> RescueExpiredJobs(const RescueExpiredJobsParams& params) {
    (void)params;
    return FailedPreconditionError("RescueExpiredJobs is not supported by this backend");
  }
  virtual Result<long> RenewJobLeases(const RenewJobLeasesParams& params) {
    (void)params;
    return FailedPreconditionError("RenewJobLeases is not supported by this backend");
  }
  virtual Status RetryJob(const RetryJobParams& params) {
    (void)params;
    return FailedPreconditionError("RetryJob is not supported by this backend");
  }
  virtual Status CancelJob(const CancelJobParams& params) {
    (void)params;
    return FailedPreconditionError("CancelJob is not supported by this backend");
  }
  // NotFound "Job <id> does not exist" (also for an id that is not a UUID).
  virtual Result<JobInfo> GetJob(std::string_view id) {
    (void)id;
    return FailedPreconditionError("GetJob is not supported by this backend");
  }
  virtual Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) {
    (void)params;
    return FailedPreconditionError("ListJobs is not supported by this backend");
  }
  virtual Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) {
    (void)params;
    return FailedPreconditionError("ListFailedJobs is not supported by this backend");
  }
  virtual Result<std::vector<JobStatusCount>> SummarizeJobs() {
    return FailedPreconditionError("SummarizeJobs is not supported by this backend");
  }
  virtual Result<JobStats> ComputeJobStats(const JobStatsFilter& params) {
    (void)params;
    return FailedPreconditionError("ComputeJobStats is not supported by this backend");
  }
  // The earliest scheduled_at of a pending or failed job of `queue` (due or not): how long an idle worker may
  // sleep. nullopt when the queue has nothing waiting. Ignores pause.
  virtual Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) {
    (void)queue;
    return FailedPreconditionError("NextJobDueAt is not supported by this backend");
  }
  // Pausing stops ClaimJobs for the queue (running jobs finish; enqueue still works). Resuming notifies
  // kJobsChannel.
  virtual Status SetQueuePaused(std::string_view queue, bool paused) {
    (void)queue;
    (void)paused;
    return FailedPreconditionError("SetQueuePaused is not supported by this backend");
  }
  // Every queue that has jobs or a pause record, by name.
  virtual Result<std::vector<QueueInfo>> ListQueues() {
    return FailedPreconditionError("ListQueues is not supported by this backend");
  }
  virtual Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) {
    (void)params;
    return FailedPreconditionError("DeleteFinishedJobs is not supported by this backend");
  }
  // The JSON text stored under key, nullopt when absent.
  virtual Result<std::optional<std::string>> GetConfig(std::string_view key) {
    (void)key;
    return FailedPreconditionError("GetConfig is not supported by this backend");
  }
  // Upserts key = value_json (validated JSON; kInvalidArgument before any write), updated_at = now; notifies
  // kConfigChannel with the key.
  virtual Status SetConfig(std::string_view key, std::string_view value_json) {
    (void)key;
    (void)value_json;
    return FailedPreconditionError("SetConfig is not supported by this backend");
  }
  virtual Result<std::vector<ConfigEntry>> ListConfig() {
    return FailedPreconditionError("ListConfig is not supported by this backend");
  }
};

// Opens a store from a URL:
//   sqlite:<directory>            one file per namespace, <directory>/<ns>.sqlite (created if missing)
//   sqlite::memory:               a private in-memory database (one process, tests)
//   postgresql://user@host:port/db?...  or  postgres://...   (libpq connection URI; namespace = schema of
//                                 that database, or a plugin placed by StoreOptions::plugin_division)
// Does not migrate. kInvalidArgument for an unknown scheme, kUnavailable if the server cannot be reached.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options = {});
// `url` with any password in it replaced by "***" (the user:password@ of a URI, a password= parameter), for
// log lines and error messages (docs/reliability.md, "Threat model").
std::string RedactDatabaseUrl(std::string_view url);
// What OpenStore(url, {.ns = ns, .plugin_division = division}) would refuse before touching anything: an
// unknown scheme or a namespace the backend cannot hold. Lets a caller check many namespaces before opening
// (and so creating) any.
Status ValidateStoreNamespace(const std::string& url, const std::string& ns,
                              const std::optional<PluginDivision>& division = std::nullopt);

// Validates a task id before any write: non-empty after trimming, at most 255 bytes (the column is
// varchar(255)), valid UTF-8. InvalidArgument "<id> is not a valid ID, expected non-empty string"
// (Backstage's message) or a message naming the limit.
Status ValidateTaskId(std::string_view id);

}  // namespace octop::store

#endif  // OCTOP_STORE_STORE_H_
