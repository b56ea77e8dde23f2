// Store: everything octop keeps in a relational database, behind one interface with one named method per operation.
//
// A Store is bound to one namespace (a Backstage plugin id, or "octop" for the job queue): on PostgreSQL the namespace
// is a schema, on SQLite a database file in the store's directory, so every plugin has its own
// `backstage_backend_tasks__tasks` table and task ids need only be unique within a plugin, as in Backstage.
//
// Implementations: store/sqlite (embedded default) and store/postgres (the cluster backend). Both pass the same
// conformance suite (tests/store_conformance). SQL lives only inside the backends, in .sql files embedded at build
// time. Callers never see SQL, rows from a driver, or backend checks: differences between backends are hidden here.
//
// Time: every comparison that decides something across nodes (is a task due, has a run expired) uses the database's
// clock, never the caller's. StoreOptions::clock may replace the database's "now" (FakeClock::DatabaseNowOverride) so
// that tests drive time; in production it is the real clock, whose override is nullopt.
//
// Errors: every method returns Status/Result. A lost connection is kUnavailable (the backend reconnects on the next
// call); bad input (an empty or over-long id, settings JSON that does not parse) is kInvalidArgument and writes
// nothing; a missing task is kNotFound and a task in the wrong state kConflict, with Backstage's exact messages.
//
// Thread-safety: a Store is safe to use from many threads at once (PostgreSQL: a connection pool; SQLite: a
// connection per thread or a serialized one, with WAL and a busy timeout). Listener objects are used by one thread.
#ifndef OCTOP_STORE_STORE_H_
#define OCTOP_STORE_STORE_H_

#include <chrono>
#include <iterator>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop::store {

// ---- Time as the database computes it ----------------------------------------------------------------------------

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
// Release only: greatest(previous next_run_start_at + period, now()) -- a fixed rate anchored to the planned start,
// never in the past, so there is no catch-up burst after downtime. A NULL previous value counts as now().
struct FixedRateAfter {
  std::chrono::microseconds period{0};
};
using TimeSpec = std::variant<NullTime, DbNowPlus, AbsoluteTime, FixedRateAfter>;

// ---- Rows ---------------------------------------------------------------------------------------------------------

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

// ---- Params and results, one pair per operation ------------------------------------------------------------------

// Register a global task (Backstage persistTask). Inserts {id, settings_json, next_run_start_at = start_at}; on an
// existing row replaces settings_json and moves next_run_start_at to next_start_at only if that is earlier -- or if
// the stored value is NULL and next_start_at is not (a task switched from manual to a timed cadence starts running).
// current_run_* and last_run_* are never touched. settings_json must be valid TaskSettingsV2 JSON.
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
  WallTime db_now;                 // the database's now() at the time of the query
  std::vector<PolledTask> tasks;   // ids with no row are absent
};

// Claim a due task: sets the ticket, started_at = now, expires_at = now + timeout (NULL without a timeout), only if
// current_run_ticket IS NULL and next_run_start_at <= now. Exactly one concurrent claimer wins.
struct ClaimTaskParams {
  std::string id;
  std::string ticket;
  std::optional<std::chrono::microseconds> timeout;
};
struct ClaimedRun {
  WallTime started_at;
  std::optional<WallTime> expires_at;
};

// Is `ticket` still the task's current ticket? (the liveness check; read-only)
struct CheckTaskTicketParams {
  std::string id;
  std::string ticket;
};

// End a run we own: clears current_run_*, sets last_run_ended_at = now, last_run_error_json = error_json (NULL on
// success) and next_run_start_at = next_run -- only where current_run_ticket = ticket (a fencing token).
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

// Stop the current run: clears current_run_*, sets last_run_ended_at = now and last_run_error_json = error_json.
// NotFound "Task <id> does not exist"; Conflict "Task <id> is not running". next_run_start_at is not changed.
struct CancelTaskParams {
  std::string id;
  std::string error_json;  // the serialized Error("Task was cancelled")
};

// The janitor: clears current_run_* of every run whose current_run_expires_at < now. Returns the ids.
struct SweepExpiredTaskRunsParams {};

struct ListTasksParams {
  std::optional<std::vector<std::string>> ids;  // all rows when absent
};

struct DeleteTaskParams {
  std::string id;
};

// ---- Notifications ------------------------------------------------------------------------------------------------

inline constexpr std::string_view kTasksChannel = "octop_tasks";
inline constexpr std::string_view kJobsChannel = "octop_jobs";

struct Notification {
  std::string channel;
  std::string payload;
};

// A subscription to notifications (PostgreSQL LISTEN/NOTIFY; SQLite: an in-process broker per database file, so
// every Store on the same file in one process sees them). Used by one thread.
class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks until at least one notification is pending, `timeout` passes or `stop` is requested, and returns what is
  // pending (possibly nothing). kUnavailable if the connection broke; the next call reconnects and re-listens.
  virtual Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) = 0;
};

// ---- Schema introspection (migrations, doctor, conformance tests) ------------------------------------------------

// Every backend applies these migrations, in this order; SchemaVersion() counts the applied ones. The first three are
// Backstage's knex migrations, recorded under these names in backstage_backend_tasks__knex_migrations (so a database
// migrated by a Backstage backend is recognised, and the other way round); the rest are octop's, recorded in
// octop_migrations.
inline constexpr std::string_view kMigrationNames[] = {
    "20210928160613_init.js",               // backstage_backend_tasks__tasks, next_run_start_at NOT NULL
    "20240712211735_nullable_next_run.js",  // next_run_start_at becomes nullable (manual tasks)
    "20250411000000_last_run.js",           // + last_run_error_json, last_run_ended_at
    "octop_0001_jobs",                      // octop_jobs and its indexes
    "octop_0002_config",                    // octop_config
};
inline constexpr int kLatestSchemaVersion = static_cast<int>(std::size(kMigrationNames));

// One column of a table, as the database's catalog reports it. `type` is the backend's own spelling of the declared
// type (SQLite: as declared, standard names upper-cased, e.g. "varchar(255)", "TEXT"; PostgreSQL: format_type(),
// e.g. "character varying(255)").
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

// ---- The interface ------------------------------------------------------------------------------------------------

struct StoreOptions {
  // Which plugin's tables: a PostgreSQL schema or an SQLite file name. Default "default".
  std::string ns = "default";
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
  // Applies pending migrations up to `version` (1..kLatestSchemaVersion) and no further; never goes down. For upgrade
  // tests (a namespace created at an old version, filled, then migrated) and for staged roll-outs.
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

  virtual Status UpsertTask(const UpsertTaskParams& params) = 0;
  virtual Result<PollTasksResult> PollTasks(const PollTasksParams& params) = 0;
  // nullopt when another claimer holds the task, it is not due, or its row is gone.
  virtual Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) = 0;
  virtual Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) = 0;
  // false when the ticket no longer matches (stolen, cancelled, reclaimed) or the row is gone.
  virtual Result<bool> TryReleaseTask(const ReleaseTaskParams& params) = 0;
  virtual Status TriggerTask(const TriggerTaskParams& params) = 0;
  virtual Status CancelTask(const CancelTaskParams& params) = 0;
  virtual Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) = 0;
  virtual Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) = 0;
  virtual Status DeleteTask(const DeleteTaskParams& params) = 0;

  virtual Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) = 0;
};

// Opens a store from a URL:
//   sqlite:<directory>            one file per namespace, <directory>/<ns>.sqlite (created if missing)
//   sqlite::memory:               a private in-memory database (one process, tests)
//   postgresql://user@host:port/db?...  or  postgres://...   (libpq connection URI; namespace = schema)
// Does not migrate. kInvalidArgument for an unknown scheme, kUnavailable if the server cannot be reached.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options = {});

// Validates a task id before any write: non-empty after trimming, at most 255 bytes (the column is varchar(255)),
// valid UTF-8. InvalidArgument "<id> is not a valid ID, expected non-empty string" (Backstage's message) or a message
// naming the limit.
Status ValidateTaskId(std::string_view id);

}  // namespace octop::store

#endif  // OCTOP_STORE_STORE_H_
