// Store: what octop keeps in a relational database, as two stores on one seam.
//
// - TaskStore (store/task_store.h): a Backstage plugin's `backstage_backend_tasks__tasks`, its namespace
//   migrated by Backstage's own knex migrations and nothing else, so a Backstage backend and octop nodes
//   share it as equals.
// - JobStore (store/job_store.h): the job queue's tables (jobs, queues, config), migrated by octop's own
// line.
//
// Both derive from Store, the part they share: one namespace with its migration line, the database's clock,
// a writability probe and notifications. On PostgreSQL a namespace is a schema (a plugin's may be its own
// database, as Backstage places it); on SQLite a database file in the store's directory.
//
// Implementations: store/sqlite (embedded default) and store/postgres (the cluster backend). Both pass the
// same conformance suite (tests/store_conformance). SQL lives only inside the backends, in .sql files
// embedded at build time. Callers never see SQL, rows from a driver, or backend checks: preconditions on the
// callers' input are checked once, above the backends (store/preconditions.cc), and the backends take what
// passed them.
//
// Time: every comparison that decides something across nodes (is a task due, has a run or a lease expired)
// uses the database's clock, never the caller's. StoreOptions::clock may replace the database's "now"
// (FakeClock::DatabaseNowOverride) so that tests drive time; in production it is the real clock, whose
// override is nullopt.
//
// Errors: every method returns Status/Result. A lost connection is kUnavailable (the backend reconnects on
// the next call); bad input is kInvalidArgument and writes nothing; a missing row is kNotFound and a row in
// the wrong state kConflict, with Backstage's exact messages for tasks.
//
// Thread-safety: a store is safe to use from many threads at once (PostgreSQL: a connection pool; SQLite: a
// pool of connections with WAL and a busy handler). Listener objects are used by one thread.
#ifndef OCTOP_STORE_STORE_H_
#define OCTOP_STORE_STORE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <octop/clock.h>
#include <octop/plugin_division.h>
#include <octop/postgres_pooling.h>
#include <octop/status.h>

namespace octop::store {

// ---- Notifications ----------------------------------------------------------------------------------------

inline constexpr std::string_view kTasksChannel = "octop_tasks";    // TriggerTask, payload the task id
inline constexpr std::string_view kJobsChannel = "octop_jobs";      // jobs to claim, payload the queue
inline constexpr std::string_view kConfigChannel = "octop_config";  // SetConfig, payload the key
// CancelJob of a running job, payload the job's id.
inline constexpr std::string_view kJobCancelChannel = "octop_job_cancels";
// A statement of plain SQL (not octop's own) UPDATEd, DELETEd or TRUNCATEd jobs, payload empty: the working
// sets need a JobStore::ReconcileJobSets (PostgreSQL only; docs/jobs.md "Jobs written by SQL").
inline constexpr std::string_view kJobsChangedChannel = "octop_jobs_changed";

struct Notification {
  std::string channel;
  std::string payload;
};

// A subscription to notifications (PostgreSQL LISTEN/NOTIFY; SQLite: an in-process broker per database file,
// so every store on the same file in one process sees them). Used by one thread.
class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks until at least one notification is pending, `timeout` passes or `stop` is requested, and returns
  // what is pending (possibly nothing). kUnavailable if the connection broke; the next call reconnects and
  // re-listens.
  virtual Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) = 0;
};

// ---- Options ----------------------------------------------------------------------------------------------

struct StoreOptions {
  // Which tables: a PostgreSQL schema or an SQLite file name. Default "default".
  std::string ns = "default";
  // Set for a plugin's task store: on PostgreSQL `ns` is then a plugin id placed as the division says (its
  // own database, or a prefixed schema). Unset: `ns` is a schema of the URL's database (the job queue,
  // tests).
  std::optional<PluginDivision> plugin_division;
  // Source of the database's "now" override (see the header comment). Default: the real clock (no override).
  const Clock* clock = &Clock::Real();
  // Maximum connections (PostgreSQL). Default 4.
  int pool_size = 4;
  // Behind a pooler in transaction mode (PostgreSQL; octop/postgres_pooling.h).
  PostgresPooling pooling;
  // How long SQLite waits for a lock before kUnavailable. Default 5 s.
  std::chrono::milliseconds busy_timeout{5000};
};

// Which migration line a namespace follows: a task namespace's (Backstage's knex migrations) or a job
// namespace's (octop's).
enum class MigrationLine { kTasks, kJobs };

// The names of `line`'s migrations, in order (kTaskMigrationNames or kJobMigrationNames); a store's
// SchemaVersion() counts how many of them its namespace has applied.
std::span<const std::string_view> MigrationNames(MigrationLine line);
inline int LatestSchemaVersion(MigrationLine line) { return static_cast<int>(MigrationNames(line).size()); }

// ---- What both stores share -------------------------------------------------------------------------------

class Store {
 public:
  virtual ~Store() = default;

  // "sqlite" or "postgres".
  virtual std::string_view backend() const = 0;

  // Applies this store's pending migrations (idempotent; safe to call from several nodes at once).
  virtual Status Migrate() = 0;
  // How many migrations of this store's line are applied to its namespace.
  virtual Result<int> SchemaVersion() = 0;
  virtual Result<WallTime> DatabaseNow() = 0;
  // Unavailable, saying why, when a write would fail now: on PostgreSQL a standby (in recovery) or a
  // read-only session; on SQLite a write that fails (read-only file or file system, disk full) or under a
  // megabyte free on its file system. For readiness probes (docs/api.md); on SQLite each call writes the file
  // header's user_version (unused by octop and knex) as 0.
  virtual Status CheckWritable() = 0;
  // A subscription to `channels` (at least one).
  virtual Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) = 0;
};

// Store's part of a decorator of `Interface` (TaskStore or JobStore): forwards every call to `target`, which
// it owns. TaskStoreWrapper and JobStoreWrapper forward the rest.
template <typename Interface>
class ForwardingStore : public Interface {
 public:
  explicit ForwardingStore(std::unique_ptr<Interface> target) : target_(std::move(target)) {}
  Interface& target() const { return *target_; }

  std::string_view backend() const override { return target_->backend(); }
  Status Migrate() override { return target_->Migrate(); }
  Result<int> SchemaVersion() override { return target_->SchemaVersion(); }
  Result<WallTime> DatabaseNow() override { return target_->DatabaseNow(); }
  Status CheckWritable() override { return target_->CheckWritable(); }
  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    return target_->Listen(std::move(channels));
  }

 private:
  std::unique_ptr<Interface> target_;
};

// Store's part of a backend's `Interface` (TaskStore or JobStore) on its `Namespace` (SqliteNamespace,
// PgNamespace), which provides the migrations of each line, the database's now, the writability probe and
// notifications, and names its backend in Namespace::kBackend.
template <typename Interface, typename Namespace>
class NamespaceStore : public Interface {
 public:
  NamespaceStore(std::unique_ptr<Namespace> ns, MigrationLine line) : ns_(std::move(ns)), line_(line) {}

  std::string_view backend() const override { return Namespace::kBackend; }
  Status Migrate() override { return ns_->MigrateTo(line_, LatestSchemaVersion(line_)); }
  Result<int> SchemaVersion() override {
    OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, ns_->AppliedMigrations(line_));
    return static_cast<int>(applied.size());
  }
  Result<WallTime> DatabaseNow() override { return ns_->DatabaseNow(); }
  Status CheckWritable() override { return ns_->CheckWritable(); }
  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    return ns_->Listen(std::move(channels));
  }

 protected:
  Namespace& ns() const { return *ns_; }

 private:
  std::unique_ptr<Namespace> ns_;
  const MigrationLine line_;
};

// `url` with any password in it replaced by "***" (the user:password@ of a URI, a password= parameter), for
// log lines and error messages (docs/reliability.md, "Threat model").
std::string RedactDatabaseUrl(std::string_view url);
// What opening a store on (url, ns, division) would refuse before touching anything: an unknown scheme or a
// namespace the backend cannot hold. Lets a caller check many namespaces before opening (and so creating)
// any.
Status ValidateStoreNamespace(const std::string& url, const std::string& ns,
                              const std::optional<PluginDivision>& division = std::nullopt);

// A database URL split into its backend ("sqlite" or "postgres") and what that backend opens (a directory,
// ":memory:" or a libpq URI). The URLs OpenTaskStore and OpenJobStore take:
//   sqlite:<directory>            one file per namespace, <directory>/<ns>.sqlite (created if missing)
//   sqlite::memory:               a private in-memory database (one process, tests)
//   postgresql://user@host:port/db?...  or  postgres://...   (libpq connection URI; namespace = schema of
//                                 that database, or a plugin placed by StoreOptions::plugin_division)
// kInvalidArgument for an unknown scheme. (Opening a store does not migrate; kUnavailable if the server
// cannot be reached.)
struct DatabaseLocation {
  std::string_view backend;
  std::string location;
};
Result<DatabaseLocation> ParseDatabaseUrl(const std::string& url);

}  // namespace octop::store

#endif  // OCTOP_STORE_STORE_H_
