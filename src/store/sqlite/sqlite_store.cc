// SqliteStore: the embedded backend of Store (see store/store.h for the contract and docs/store.md for the
// SQL).
//
// Structure: a small pool of sqlite3 connections per Store (one for ":memory:", whose database lives and dies
// with its only connection), each with its own cache of prepared statements; every operation leases one
// connection for its duration. SQLite allows one writer at a time: claims and the other writes are single
// statements (atomic on their own), migrations run inside BEGIN IMMEDIATE, and lock waits are bounded by the
// busy timeout. Errors inside are SqliteFailure exceptions, turned into a Status at each public method.
#include "store/sqlite/sqlite_store.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/statvfs.h>

#include <octop/task_settings.h>

#include "sqlite_queries.h"
#include "store/job_rules.h"
#include "store/sqlite/sqlite_time.h"

namespace octop::store {

namespace {

namespace sql = ::octop::store::sqlite::sql;
using sqlite::FormatTime;
using sqlite::OffsetModifier;
using sqlite::ParseTime;

// ---- Errors -----------------------------------------------------------------------------------------------

class SqliteFailure : public std::exception {
 public:
  explicit SqliteFailure(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

[[noreturn]] void Fail(Status status) { throw SqliteFailure(std::move(status)); }

[[noreturn]] void FailSqlite(sqlite3* db, int rc, std::string_view context) {
  const std::string detail =
      std::string(context) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      Fail(UnavailableError("SQLite database is locked (busy timeout passed), " + detail));
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_PROTOCOL:
    case SQLITE_READONLY:
      Fail(UnavailableError("SQLite " + detail));
    case SQLITE_CONSTRAINT:
      Fail(InvalidArgumentError("SQLite constraint failed, " + detail));
    default:
      Fail(InternalError("SQLite " + detail));
  }
}

// ---- Connections and statements ---------------------------------------------------------------------------

// One sqlite3 connection and its prepared statements. Used by one thread at a time (the pool guarantees it).
class Connection {
 public:
  explicit Connection(sqlite3* db) : db_(db) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    for (auto& [text, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  sqlite3* db() const { return db_; }

  // Lock waits retry every millisecond until `timeout` has passed since the first try. SQLite's own busy
  // timeout backs off to a retry every 100 ms, so the connection that has waited longest polls least often
  // and loses the lock to newer ones: under load it starved past the whole timeout while other processes
  // took turns (docs/store.md, "Connections, time and notifications").
  void WaitForLocksUpTo(std::chrono::milliseconds timeout) {
    busy_timeout_ = timeout;
    sqlite3_busy_handler(db_, &Connection::OnBusy, this);
  }

  // The statements are the embedded constants, so their address identifies them.
  sqlite3_stmt* Prepare(std::string_view text) {
    if (auto it = cache_.find(text.data()); it != cache_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, text.data(), static_cast<int>(text.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) FailSqlite(db_, rc, "preparing a statement");
    cache_.emplace(text.data(), stmt);
    return stmt;
  }

  // Runs a constant script of one or more statements (migrations, pragmas, transaction control).
  void Exec(std::string_view script) {
    const std::string text(script);
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
    if (rc != SQLITE_OK) {
      const std::string message = error != nullptr ? error : sqlite3_errstr(rc);
      sqlite3_free(error);
      FailSqlite(nullptr, rc, message);
    }
  }

 private:
  static int OnBusy(void* self, int tries) {
    auto* conn = static_cast<Connection*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (tries == 0) conn->busy_since_ = now;
    if (now - conn->busy_since_ >= conn->busy_timeout_) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 1;
  }

  sqlite3* db_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
  std::chrono::milliseconds busy_timeout_{0};
  std::chrono::steady_clock::time_point busy_since_;  // the first try of the current wait
};

// One use of a cached statement: bind by name, step, read columns; reset and unbound when it goes out of
// scope.
class Stmt {
 public:
  Stmt(Connection& conn, std::string_view text) : conn_(conn), stmt_(conn.Prepare(text)) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  Stmt& Bind(const char* name, std::string_view value) {
    Check(sqlite3_bind_text64(stmt_, Index(name), value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
    return *this;
  }
  Stmt& BindOpt(const char* name, const std::optional<std::string>& value) {
    if (!value) return BindNull(name);
    return Bind(name, std::string_view(*value));
  }
  Stmt& Bind(const char* name, std::int64_t value) {
    Check(sqlite3_bind_int64(stmt_, Index(name), value));
    return *this;
  }
  Stmt& BindNull(const char* name) {
    Check(sqlite3_bind_null(stmt_, Index(name)));
    return *this;
  }

  // true: a row is available; false: done.
  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    FailSqlite(conn_.db(), rc, "running a statement");
  }
  void Run() {
    while (Step()) {
    }
  }
  int Changes() const { return sqlite3_changes(conn_.db()); }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    if (p == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(p),
                       static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::optional<std::string> OptText(int col) const {
    if (IsNull(col)) return std::nullopt;
    return Text(col);
  }
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }

  // A datetime column: text in any form ParseTime reads, or a number of milliseconds since the epoch (what a
  // JavaScript Date bound by knex turns into).
  std::optional<WallTime> Time(int col) const {
    switch (sqlite3_column_type(stmt_, col)) {
      case SQLITE_NULL:
        return std::nullopt;
      case SQLITE_INTEGER:
      case SQLITE_FLOAT: {
        // Years 1 to 9999, as text times: beyond them the instant does not fit a WallTime (nanoseconds).
        constexpr double kMinMs = -62135596800000.0;
        constexpr double kMaxMs = 253402300799999.0;
        const double ms = sqlite3_column_double(stmt_, col);
        if (!(ms >= kMinMs && ms <= kMaxMs)) {
          Fail(InternalError("datetime " + std::to_string(ms) + " (milliseconds since the epoch) in column " +
                             std::string(sqlite3_column_name(stmt_, col)) + " is out of range"));
        }
        return WallTime{} + std::chrono::milliseconds(static_cast<std::int64_t>(ms));
      }
      default:
        break;
    }
    const std::string text = Text(col);
    if (auto t = ParseTime(text)) return t;
    Fail(InternalError(std::string("unreadable datetime '") + text + "' in column " +
                       sqlite3_column_name(stmt_, col)));
  }

 private:
  int Index(const char* name) const {
    const int index = sqlite3_bind_parameter_index(stmt_, name);
    if (index == 0) Fail(InternalError(std::string("SQL statement has no parameter ") + name));
    return index;
  }
  void Check(int rc) const {
    if (rc != SQLITE_OK) FailSqlite(conn_.db(), rc, "binding a parameter");
  }

  Connection& conn_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when left without Commit() (an exception).
class ImmediateTransaction {
 public:
  explicit ImmediateTransaction(Connection& conn) : conn_(conn) { conn_.Exec(sql::kBeginImmediate); }
  ImmediateTransaction(const ImmediateTransaction&) = delete;
  ImmediateTransaction& operator=(const ImmediateTransaction&) = delete;
  ~ImmediateTransaction() {
    if (!done_) sqlite3_exec(conn_.db(), std::string(sql::kRollback).c_str(), nullptr, nullptr, nullptr);
  }
  void Commit() {
    conn_.Exec(sql::kCommit);
    done_ = true;
  }

 private:
  Connection& conn_;
  bool done_ = false;
};

// Up to `max_size` connections to one database, opened on demand and reused.
class ConnectionPool {
 public:
  ConnectionPool(std::string path, bool in_memory, int max_size, std::chrono::milliseconds busy_timeout)
      : path_(std::move(path)), in_memory_(in_memory), max_size_(max_size), busy_timeout_(busy_timeout) {}

  const std::string& path() const { return path_; }
  bool in_memory() const { return in_memory_; }

  class Lease {
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.Return(std::move(conn_)); }
    Connection& operator*() const { return *conn_; }

   private:
    ConnectionPool& pool_;
    std::unique_ptr<Connection> conn_;
  };

  Lease Acquire() {
    std::unique_lock lock(mu_);
    available_.wait(lock, [&] { return !idle_.empty() || open_ < max_size_; });
    if (!idle_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(conn));
    }
    ++open_;
    lock.unlock();
    try {
      return Lease(*this, OpenConnection());
    } catch (...) {
      lock.lock();
      --open_;
      available_.notify_one();
      throw;
    }
  }

 private:
  void Return(std::unique_ptr<Connection> conn) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(conn));
    available_.notify_one();
  }

  std::unique_ptr<Connection> OpenConnection() {
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path_.c_str(), &db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      sqlite3_close_v2(db);
      Fail(UnavailableError("cannot open SQLite database '" + path_ + "': " + message));
    }
    auto conn = std::make_unique<Connection>(db);
    sqlite3_extended_result_codes(db, 1);
    conn->WaitForLocksUpTo(busy_timeout_);
    if (!in_memory_) EnableWal(*conn);
    conn->Exec(sql::kConfigureConnection);
    return conn;
  }

  // Switching a new file to WAL needs an exclusive lock; when several processes open it at once the switch
  // can report SQLITE_BUSY without consulting the busy handler, so it is retried until the busy timeout.
  void EnableWal(Connection& conn) {
    const auto deadline = std::chrono::steady_clock::now() + busy_timeout_;
    for (auto pause = std::chrono::milliseconds(1);;
         pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
      try {
        conn.Exec(sql::kEnableWal);
        return;
      } catch (const SqliteFailure& e) {
        if (e.status().code() != StatusCode::kUnavailable || std::chrono::steady_clock::now() >= deadline)
          throw;
      }
      std::this_thread::sleep_for(pause);
    }
  }

  const std::string path_;
  const bool in_memory_;
  const int max_size_;
  const std::chrono::milliseconds busy_timeout_;
  std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  int open_ = 0;                                   // guarded by mu_
};

// ---- Notifications: an in-process broker per database file ------------------------------------------------

struct Subscription {
  std::vector<std::string> channels;
  std::mutex mu;
  std::condition_variable_any arrived;
  std::deque<Notification> pending;  // guarded by mu
};

// Every Store of this process on one database file shares a Hub, so a trigger through one Store wakes
// listeners of all of them. There is no cross-process delivery: other processes fall back to polling.
class Hub {
 public:
  void Publish(std::string_view channel, std::string_view payload) {
    std::lock_guard lock(mu_);
    for (const auto& weak : subscriptions_) {
      auto sub = weak.lock();
      if (!sub || std::find(sub->channels.begin(), sub->channels.end(), channel) == sub->channels.end())
        continue;
      {
        std::lock_guard sub_lock(sub->mu);
        sub->pending.push_back({std::string(channel), std::string(payload)});
      }
      sub->arrived.notify_all();
    }
  }

  std::shared_ptr<Subscription> Subscribe(std::vector<std::string> channels) {
    auto sub = std::make_shared<Subscription>();
    sub->channels = std::move(channels);
    std::lock_guard lock(mu_);
    std::erase_if(subscriptions_, [](const auto& weak) { return weak.expired(); });
    subscriptions_.push_back(sub);
    return sub;
  }

  // The hub of the database `key` (a canonical file path, or a per-store key for ":memory:").
  static std::shared_ptr<Hub> For(const std::string& key) {
    static std::mutex* mu = new std::mutex;  // never destroyed: stores may outlive static destruction order
    static auto* hubs = new std::map<std::string, std::weak_ptr<Hub>>;
    std::lock_guard lock(*mu);
    std::erase_if(*hubs, [](const auto& entry) { return entry.second.expired(); });
    auto& slot = (*hubs)[key];
    auto hub = slot.lock();
    if (!hub) {
      hub = std::make_shared<Hub>();
      slot = hub;
    }
    return hub;
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<Subscription>> subscriptions_;  // guarded by mu_
};

class SqliteListener final : public Listener {
 public:
  SqliteListener(std::shared_ptr<Hub> hub, std::shared_ptr<Subscription> sub)
      : hub_(std::move(hub)), sub_(std::move(sub)) {}

  Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) override {
    std::unique_lock lock(sub_->mu);
    sub_->arrived.wait_for(lock, stop, timeout, [&] { return !sub_->pending.empty(); });
    std::vector<Notification> out(std::make_move_iterator(sub_->pending.begin()),
                                  std::make_move_iterator(sub_->pending.end()));
    sub_->pending.clear();
    return out;
  }

 private:
  std::shared_ptr<Hub> hub_;  // keeps the hub (and so the registration) alive as long as the listener
  std::shared_ptr<Subscription> sub_;
};

// ---- Migrations -------------------------------------------------------------------------------------------

struct Migration {
  std::string_view script;
  bool knex;  // recorded in knex's table (Backstage's own migrations) rather than octop_migrations
};
constexpr std::array kMigrations = {
    Migration{sql::kMigration1Init, true},    Migration{sql::kMigration2NullableNextRun, true},
    Migration{sql::kMigration3LastRun, true}, Migration{sql::kMigration4Jobs, false},
    Migration{sql::kMigration5Config, false}, Migration{sql::kMigration6JobQueue, false},
};
// A migration named in store.h needs its SQLite script here, in the same position.
static_assert(kMigrations.size() == static_cast<std::size_t>(kLatestSchemaVersion));

// Which of kMigrationNames are recorded as applied.
std::array<bool, kMigrations.size()> ReadApplied(Connection& conn) {
  std::array<bool, kMigrations.size()> applied{};
  bool has_knex = false;
  bool has_octop = false;
  {
    Stmt tables(conn, sql::kBookkeepingTables);
    while (tables.Step()) {
      const std::string name = tables.Text(0);
      has_knex = has_knex || name == "backstage_backend_tasks__knex_migrations";
      has_octop = has_octop || name == "octop_migrations";
    }
  }
  if (has_knex) {
    Stmt knex(conn, sql::kListKnexMigrations);
    while (knex.Step()) {
      const std::string name = knex.Text(0);
      for (std::size_t i = 0; i < kMigrations.size(); ++i) {
        if (kMigrations[i].knex && kMigrationNames[i] == name) applied[i] = true;
      }
    }
  }
  if (has_octop) {
    Stmt octop(conn, sql::kListOctopMigrations);
    while (octop.Step()) {
      const std::int64_t version = octop.Int(0);
      if (version >= 1 && version <= kLatestSchemaVersion &&
          !kMigrations[static_cast<std::size_t>(version - 1)].knex) {
        applied[static_cast<std::size_t>(version - 1)] = true;
      }
    }
  }
  return applied;
}

// ---- Helpers for task operations --------------------------------------------------------------------------

// A JSON array of ids for `IN (SELECT value FROM json_each(:ids))`. Ids that are not valid UTF-8 cannot be
// stored (writes validate them), so they are left out rather than mangled into something that might match
// another id.
std::string IdsJson(const std::vector<std::string>& ids) {
  nlohmann::json array = nlohmann::json::array();
  for (const std::string& id : ids) {
    try {
      (void)nlohmann::json(id).dump();
      array.push_back(id);
    } catch (const nlohmann::json::exception&) {
    }
  }
  return array.dump();
}

TaskRow ReadTaskRow(const Stmt& row) {
  TaskRow task;
  task.id = row.Text(0);
  task.settings_json = row.Text(1);
  task.next_run_start_at = row.Time(2);
  task.current_run_ticket = row.OptText(3);
  task.current_run_started_at = row.Time(4);
  task.current_run_expires_at = row.Time(5);
  task.last_run_error_json = row.OptText(6);
  task.last_run_ended_at = row.Time(7);
  return task;
}

Status NoSuchTask(const std::string& id) { return NotFoundError("Task " + id + " does not exist"); }

// ---- Helpers for job operations ---------------------------------------------------------------------------

// The 17 columns every job statement returns, in jobs.sql's order.
JobInfo ReadJobRow(const Stmt& row) {
  JobInfo job;
  job.id = row.Text(0);
  job.queue = row.Text(1);
  job.kind = row.Text(2);
  job.payload = row.Text(3);
  job.priority = static_cast<int>(row.Int(4));
  job.scheduled_at = row.Time(5).value_or(WallTime{});
  const std::string status = row.Text(6);
  const auto parsed = ParseJobStatus(status);
  if (!parsed) Fail(InternalError("unknown job status '" + status + "' for job " + job.id));
  job.status = *parsed;
  job.attempt = static_cast<int>(row.Int(7));
  job.max_retries = static_cast<int>(row.Int(8));
  job.attempt_token = row.OptText(9);
  job.last_error = row.OptText(10);
  job.created_at = row.Time(11).value_or(WallTime{});
  job.started_at = row.Time(12);
  job.completed_at = row.Time(13);
  job.expires_at = row.Time(14);
  job.unique_key = row.OptText(15);
  job.worker_id = row.OptText(16);
  return job;
}

// now + offset as stored text.
std::string JobTimeAfter(Connection& conn, const std::string& now, std::chrono::microseconds offset) {
  if (offset.count() == 0) return now;
  Stmt row(conn, sql::kNowPlus);
  row.BindNull(":at").Bind(":now", now).Bind(":offset", OffsetModifier(offset));
  if (!row.Step()) Fail(InternalError("NowPlus returned no row"));
  return row.Text(0);
}

void AddQueue(std::vector<std::string>& queues, const std::string& queue) {
  if (std::find(queues.begin(), queues.end(), queue) == queues.end()) queues.push_back(queue);
}

// Inserts a validated batch on `conn`, which must hold the write lock (BEGIN IMMEDIATE): the unique-key
// lookup and the insert cannot be separated by another writer. Appends the queues that received a job to
// `queues`.
std::vector<EnqueueResult> EnqueueOnConnection(Connection& conn, const std::string& now,
                                               const std::vector<JobSpec>& jobs,
                                               std::vector<std::string>& queues) {
  std::vector<EnqueueResult> out;
  out.reserve(jobs.size());
  for (const JobSpec& job : jobs) {
    if (job.unique_key) {
      Stmt live(conn, sql::kFindLiveJobByKey);
      live.Bind(":unique_key", *job.unique_key);
      if (live.Step()) {
        out.push_back({live.Text(0), true});
        continue;
      }
    }
    const std::string scheduled_at = job.scheduled_at ? FormatTime(*job.scheduled_at) : now;
    EnqueueResult inserted{NewJobId(), false};
    Stmt(conn, sql::kInsertJob)
        .Bind(":id", inserted.id)
        .Bind(":queue", job.queue)
        .Bind(":kind", job.kind)
        .Bind(":payload", job.payload)
        .Bind(":priority", std::int64_t{job.priority})
        .Bind(":scheduled_at", scheduled_at)
        .Bind(":max_retries", std::int64_t{job.max_retries})
        .Bind(":now", now)
        .BindOpt(":unique_key", job.unique_key)
        .Run();
    out.push_back(std::move(inserted));
    AddQueue(queues, job.queue);
  }
  return out;
}

// The caller's own statement inside WithTransaction: prepared for this one use (not cached: arbitrary text),
// parameters bound as text by $N, ?N or position.
SqlRows ExecuteCallerStatement(Connection& conn, std::string_view text,
                               const std::vector<std::optional<std::string>>& params) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(conn.db(), text.data(), static_cast<int>(text.size()), &raw, &tail);
  if (rc != SQLITE_OK) FailSqlite(conn.db(), rc, "preparing the caller's statement");
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
  if (!stmt) Fail(InvalidArgumentError("Execute: the SQL text holds no statement"));
  for (const char* p = tail; p != nullptr && p < text.data() + text.size(); ++p) {
    if (*p != ';' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
      Fail(InvalidArgumentError("Execute runs exactly one statement; found more SQL after the first"));
    }
  }
  const int count = sqlite3_bind_parameter_count(stmt.get());
  if (static_cast<std::size_t>(count) != params.size()) {
    Fail(InvalidArgumentError("Execute: the statement has " + std::to_string(count) + " parameters, " +
                              std::to_string(params.size()) + " were given"));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    int index = sqlite3_bind_parameter_index(stmt.get(), ("$" + n).c_str());
    if (index == 0) index = sqlite3_bind_parameter_index(stmt.get(), ("?" + n).c_str());
    if (index == 0 && sqlite3_bind_parameter_name(stmt.get(), static_cast<int>(i + 1)) == nullptr) {
      index = static_cast<int>(i + 1);
    }
    if (index == 0) Fail(InvalidArgumentError("Execute: the statement has no parameter $" + n));
    rc = params[i] ? sqlite3_bind_text64(stmt.get(), index, params[i]->data(), params[i]->size(),
                                         SQLITE_TRANSIENT, SQLITE_UTF8)
                   : sqlite3_bind_null(stmt.get(), index);
    if (rc != SQLITE_OK) FailSqlite(conn.db(), rc, "binding a parameter");
  }
  SqlRows out;
  const sqlite3_int64 changes_before = sqlite3_total_changes64(conn.db());
  const int columns = sqlite3_column_count(stmt.get());
  for (int c = 0; c < columns; ++c) out.columns.emplace_back(sqlite3_column_name(stmt.get(), c));
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    std::vector<std::optional<std::string>> values;
    for (int c = 0; c < columns; ++c) {
      if (sqlite3_column_type(stmt.get(), c) == SQLITE_NULL) {
        values.emplace_back(std::nullopt);
      } else {
        const auto* p = sqlite3_column_text(stmt.get(), c);
        values.emplace_back(std::string(reinterpret_cast<const char*>(p),
                                        static_cast<std::size_t>(sqlite3_column_bytes(stmt.get(), c))));
      }
    }
    out.rows.push_back(std::move(values));
  }
  if (rc != SQLITE_DONE) FailSqlite(conn.db(), rc, "running the caller's statement");
  out.affected_rows = static_cast<long>(sqlite3_total_changes64(conn.db()) - changes_before);
  if (sqlite3_get_autocommit(conn.db()) != 0) {
    Fail(FailedPreconditionError(
        "Execute: the statement ended the transaction (use WithTransaction's return)"));
  }
  return out;
}

class SqliteTransaction final : public Transaction {
 public:
  SqliteTransaction(Connection& conn, std::string now) : conn_(conn), now_(std::move(now)) {}

  Result<SqlRows> Execute(std::string_view text,
                          const std::vector<std::optional<std::string>>& params) override {
    return Run([&] { return ExecuteCallerStatement(conn_, text, params); });
  }

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
    return Run([&] { return EnqueueOnConnection(conn_, now_, jobs, queues_); });
  }

  std::string_view backend() const override { return "sqlite"; }

  // The first failure: once a statement failed the transaction is rolled back whatever the callback returns.
  const std::optional<Status>& failure() const { return failure_; }
  const std::vector<std::string>& queues() const { return queues_; }

 private:
  template <typename Fn>
  auto Run(Fn&& fn) -> Result<decltype(fn())> {
    if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
    try {
      return fn();
    } catch (const SqliteFailure& e) {
      failure_ = e.status();
    } catch (const std::exception& e) {
      failure_ = InternalError(std::string("SQLite backend: ") + e.what());
    }
    return *failure_;
  }

  Connection& conn_;
  const std::string now_;
  std::optional<Status> failure_;
  std::vector<std::string> queues_;
};

std::int64_t OutcomeCode(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSuccess:
      return 0;
    case JobOutcome::kRetry:
    case JobOutcome::kFail:
      return 1;
    case JobOutcome::kCancel:
      return 2;
    case JobOutcome::kRelease:
      return 3;
  }
  return -1;
}

// ---- The store --------------------------------------------------------------------------------------------

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, bool in_memory, const std::string& hub_key, const StoreOptions& options)
      : clock_(options.clock != nullptr ? options.clock : &Clock::Real()),
        pool_(std::move(path), in_memory, in_memory ? 1 : std::max(1, options.pool_size),
              options.busy_timeout),
        hub_(Hub::For(hub_key)) {}

  // Opens the first connection, so that an unusable file is reported by OpenSqliteStore.
  Status Connect() {
    return Guard([&](Connection&) { return Status::Ok(); });
  }

  std::string_view backend() const override { return "sqlite"; }

  // SQLite keeps no session list: a Backstage backend on the same file cannot be seen.
  Result<int> CountBackstageSessions() override { return 0; }

  Status Migrate() override { return MigrateTo(kLatestSchemaVersion); }

  Status MigrateTo(int version) override {
    if (version < 1 || version > kLatestSchemaVersion) {
      return InvalidArgumentError("schema version " + std::to_string(version) + " is not between 1 and " +
                                  std::to_string(kLatestSchemaVersion));
    }
    return Guard([&](Connection& conn) {
      // One writer at a time: a concurrent Migrate() (another Store or process) waits here, then finds the
      // work done and records nothing twice.
      ImmediateTransaction tx(conn);
      conn.Exec(sql::kCreateBookkeeping);
      const auto applied = ReadApplied(conn);
      const std::string now = Now(conn);
      std::optional<std::int64_t> batch;
      for (std::size_t i = 0; i < static_cast<std::size_t>(version); ++i) {
        if (applied[i]) continue;
        conn.Exec(kMigrations[i].script);
        if (kMigrations[i].knex) {
          if (!batch) {
            Stmt next(conn, sql::kNextKnexBatch);
            batch = next.Step() ? next.Int(0) : 1;
          }
          Stmt(conn, sql::kRecordKnexMigration)
              .Bind(":name", kMigrationNames[i])
              .Bind(":batch", *batch)
              .Bind(":now", now)
              .Run();
        } else {
          Stmt(conn, sql::kRecordOctopMigration)
              .Bind(":version", static_cast<std::int64_t>(i + 1))
              .Bind(":name", kMigrationNames[i])
              .Bind(":now", now)
              .Run();
        }
      }
      tx.Commit();
      return Status::Ok();
    });
  }

  Result<int> SchemaVersion() override {
    return Guard([&](Connection& conn) -> Result<int> {
      const auto applied = ReadApplied(conn);
      return static_cast<int>(std::count(applied.begin(), applied.end(), true));
    });
  }

  Result<std::vector<std::string>> AppliedMigrations() override {
    return Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
      const auto applied = ReadApplied(conn);
      std::vector<std::string> names;
      for (std::size_t i = 0; i < applied.size(); ++i) {
        if (applied[i]) names.emplace_back(kMigrationNames[i]);
      }
      return names;
    });
  }

  Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) override {
    return Guard([&](Connection& conn) -> Result<std::vector<ColumnInfo>> {
      std::vector<ColumnInfo> columns;
      Stmt row(conn, sql::kDescribeTable);
      row.Bind(":table", table);
      while (row.Step()) columns.push_back({row.Text(0), row.Text(1), row.Int(2) != 0, row.Int(3) != 0});
      return columns;
    });
  }

  Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) override {
    return Guard([&](Connection& conn) -> Result<std::vector<IndexInfo>> {
      std::vector<IndexInfo> indexes;
      {
        Stmt row(conn, sql::kListIndexes);
        row.Bind(":table", table);
        while (row.Step()) indexes.push_back({row.Text(0), {}, row.Int(1) != 0, row.Int(2) != 0});
      }
      for (IndexInfo& index : indexes) {
        Stmt column(conn, sql::kIndexColumns);
        column.Bind(":index", index.name);
        while (column.Step()) {
          if (!column.IsNull(0)) index.columns.push_back(column.Text(0));
        }
      }
      return indexes;
    });
  }

  Result<WallTime> DatabaseNow() override {
    return Guard([&](Connection& conn) -> Result<WallTime> { return ParseNow(Now(conn)); });
  }

  Status CheckWritable() override {
    if (!pool_.in_memory()) {
      // Below a megabyte a write may fail any moment; say so before it does.
      struct statvfs fs {};
      const std::string& file = pool_.path();
      const std::string dir = std::filesystem::path(file).parent_path().string();
      if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0 &&
          static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize < 1024ULL * 1024) {
        return UnavailableError("SQLite database " + file + ": less than 1 MiB free on its file system");
      }
    }
    return Guard([&](Connection& conn) -> Status {
      conn.Exec(sql::kWriteProbe);
      return Status::Ok();
    });
  }

  Status UpsertTask(const UpsertTaskParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateTaskId(params.id));
    if (auto settings = TaskSettingsV2::FromJson(params.settings_json); !settings.ok()) {
      return InvalidArgumentError("Invalid settings for task " + params.id + ": " +
                                  settings.status().message());
    }
    if (std::holds_alternative<FixedRateAfter>(params.start_at) ||
        std::holds_alternative<FixedRateAfter>(params.next_start_at)) {
      return InvalidArgumentError("FixedRateAfter is only meaningful when releasing a task");
    }
    return Guard([&](Connection& conn) {
      const std::string now = Now(conn);
      Stmt(conn, sql::kUpsertTask)
          .Bind(":id", params.id)
          .Bind(":settings_json", params.settings_json)
          .BindOpt(":start_at", Resolve(conn, params.start_at, now))
          .BindOpt(":next_start_at", Resolve(conn, params.next_start_at, now))
          .Run();
      return Status::Ok();
    });
  }

  Result<PollTasksResult> PollTasks(const PollTasksParams& params) override {
    return Guard([&](Connection& conn) -> Result<PollTasksResult> {
      const std::string now = Now(conn);
      PollTasksResult result;
      result.db_now = ParseNow(now);
      if (params.ids.empty()) return result;
      Stmt row(conn, sql::kPollTasks);
      row.Bind(":now", now).Bind(":ids", IdsJson(params.ids));
      while (row.Step()) {
        PolledTask task;
        task.id = row.Text(0);
        task.settings_json = row.Text(1);
        task.next_run_start_at = row.Time(2);
        task.current_run_expires_at = row.Time(3);
        task.running = row.Int(4) != 0;
        task.ready = row.Int(5) != 0;
        result.tasks.push_back(std::move(task));
      }
      return result;
    });
  }

  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    if (params.ticket.empty()) return InvalidArgumentError("a claim needs a non-empty ticket");
    return Guard([&](Connection& conn) -> Result<std::optional<ClaimedRun>> {
      const std::string now = Now(conn);
      Stmt row(conn, sql::kClaimTask);
      row.Bind(":id", params.id).Bind(":ticket", params.ticket).Bind(":now", now);
      if (params.timeout) {
        row.Bind(":timeout", OffsetModifier(*params.timeout));
      } else {
        row.BindNull(":timeout");
      }
      std::optional<ClaimedRun> claimed;
      while (row.Step()) claimed = ClaimedRun{row.Time(0).value_or(WallTime{}), row.Time(1), row.Time(2)};
      return claimed;
    });
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    return Guard([&](Connection& conn) -> Result<bool> {
      if (params.extend_lease) {
        const std::string now = Now(conn);
        Stmt row(conn, sql::kExtendTaskLease);
        row.Bind(":id", params.id)
            .Bind(":ticket", params.ticket)
            .Bind(":now", now)
            .Bind(":lease", OffsetModifier(*params.extend_lease));
        return row.Step();
      }
      Stmt row(conn, sql::kCheckTaskTicket);
      row.Bind(":id", params.id).Bind(":ticket", params.ticket);
      return row.Step();
    });
  }

  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    return Guard([&](Connection& conn) -> Result<bool> {
      const std::string now = Now(conn);
      Stmt row(conn, sql::kReleaseTask);
      row.Bind(":id", params.id)
          .Bind(":ticket", params.ticket)
          .Bind(":now", now)
          .BindOpt(":error_json", params.error_json);
      BindNextRun(conn, row, params.next_run, now);
      row.Run();
      return row.Changes() == 1;
    });
  }

  Status TriggerTask(const TriggerTaskParams& params) override {
    Status status = Guard([&](Connection& conn) {
      const std::string now = Now(conn);
      Stmt update(conn, sql::kTriggerTask);
      update.Bind(":id", params.id).Bind(":now", now).Run();
      if (update.Changes() == 1) return Status::Ok();
      if (!Exists(conn, params.id)) return NoSuchTask(params.id);
      return ConflictError("Task " + params.id + " is currently running");
    });
    if (status.ok()) hub_->Publish(kTasksChannel, params.id);
    return status;
  }

  Status CancelTask(const CancelTaskParams& params) override {
    return Guard([&](Connection& conn) {
      const std::string now = Now(conn);
      Stmt update(conn, sql::kCancelTask);
      update.Bind(":id", params.id).Bind(":now", now).Bind(":error_json", params.error_json);
      update.Bind(":keep_next", std::int64_t{params.next_run ? 0 : 1});
      BindNextRun(conn, update, params.next_run.value_or(NullTime{}), now);
      update.Run();
      if (update.Changes() == 1) return Status::Ok();
      if (!Exists(conn, params.id)) return NoSuchTask(params.id);
      return ConflictError("Task " + params.id + " is not running");
    });
  }

  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    return Guard([&](Connection& conn) -> Result<bool> {
      const std::string now = Now(conn);
      Stmt row(conn, sql::kCapTaskNextRun);
      row.Bind(":id", params.id).Bind(":now", now).Bind(":within", OffsetModifier(params.within));
      return row.Step();
    });
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    return Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
      const std::string now = Now(conn);
      std::vector<std::string> ids;
      Stmt row(conn, sql::kSweepExpiredTaskRuns);
      row.Bind(":now", now).Bind(":expired_before", Earlier(now, params.expired_before));
      if (params.error_json) {
        row.Bind(":error", *params.error_json);
      } else {
        row.BindNull(":error");
      }
      while (row.Step()) ids.push_back(row.Text(0));
      std::sort(ids.begin(), ids.end());
      return ids;
    });
  }

  Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) override {
    return Guard([&](Connection& conn) -> Result<std::vector<TaskRow>> {
      std::vector<TaskRow> tasks;
      if (params.ids) {
        if (params.ids->empty()) return tasks;
        Stmt row(conn, sql::kListTasksByIds);
        row.Bind(":ids", IdsJson(*params.ids));
        while (row.Step()) tasks.push_back(ReadTaskRow(row));
      } else {
        Stmt row(conn, sql::kListAllTasks);
        while (row.Step()) tasks.push_back(ReadTaskRow(row));
      }
      return tasks;
    });
  }

  Status DeleteTask(const DeleteTaskParams& params) override {
    return Guard([&](Connection& conn) {
      Stmt del(conn, sql::kDeleteTask);
      del.Bind(":id", params.id).Run();
      return del.Changes() == 1 ? Status::Ok() : NoSuchTask(params.id);
    });
  }

  // ---- Jobs (jobs.sql) ----

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
    std::vector<std::string> queues;
    auto result = Guard([&](Connection& conn) -> Result<std::vector<EnqueueResult>> {
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      std::vector<EnqueueResult> out = EnqueueOnConnection(conn, now, jobs, queues);
      tx.Commit();
      return out;
    });
    if (result.ok()) {
      for (const std::string& queue : queues) hub_->Publish(kJobsChannel, queue);
    }
    return result;
  }

  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override {
    std::vector<std::string> queues;
    Status status = Guard([&](Connection& conn) -> Status {
      ImmediateTransaction tx(conn);
      SqliteTransaction txn(conn, Now(conn));
      Status result = fn(txn);
      if (!result.ok()) return result;  // ~ImmediateTransaction rolls back
      if (txn.failure()) return *txn.failure();
      tx.Commit();
      queues = txn.queues();
      return Status::Ok();
    });
    if (status.ok()) {
      for (const std::string& queue : queues) hub_->Publish(kJobsChannel, queue);
    }
    return status;
  }

  Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", params.queue));
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ClaimJobs: limit must be 1..1000, got " + std::to_string(params.limit));
    }
    if (params.timeout.count() < 0) return InvalidArgumentError("ClaimJobs: timeout must be >= 0");
    if (!IsStorableText(params.worker_id))
      return InvalidArgumentError("ClaimJobs: worker_id is not valid UTF-8");
    std::optional<std::string> kinds;
    if (!params.kinds.empty()) {
      nlohmann::json array = nlohmann::json::array();
      for (const std::string& kind : params.kinds) {
        if (IsStorableText(kind)) array.push_back(kind);
      }
      kinds = array.dump();
    }
    return Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      std::vector<JobInfo> jobs;
      {
        Stmt row(conn, sql::kClaimJobs);
        row.Bind(":now", now)
            .Bind(":timeout", OffsetModifier(params.timeout))
            .Bind(":worker_id", params.worker_id)
            .Bind(":queue", params.queue)
            .BindOpt(":kinds", kinds)
            .Bind(":limit", std::int64_t{params.limit});
        while (row.Step()) jobs.push_back(ReadJobRow(row));
      }
      tx.Commit();
      std::sort(jobs.begin(), jobs.end(), [](const JobInfo& a, const JobInfo& b) {
        return std::tie(a.priority, a.scheduled_at, a.id) < std::tie(b.priority, b.scheduled_at, b.id);
      });
      return jobs;
    });
  }

  Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) override {
    for (const JobCompletion& c : completions) {
      if (OutcomeCode(c.outcome) < 0)
        return InvalidArgumentError("CompleteJobs: unknown outcome for job " + c.id);
    }
    return Guard([&](Connection& conn) -> Result<std::vector<bool>> {
      std::vector<bool> applied(completions.size(), false);
      if (completions.empty()) return applied;
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      for (std::size_t i = 0; i < completions.size(); ++i) {
        const JobCompletion& c = completions[i];
        std::optional<std::string> error;
        if (c.error) error = TruncateJobError(*c.error);
        Stmt update(conn, sql::kCompleteJob);
        update.Bind(":outcome", OutcomeCode(c.outcome))
            .Bind(":now", now)
            .Bind(":delay", OffsetModifier(std::max(c.retry_delay, std::chrono::microseconds(0))))
            .BindOpt(":error", error)
            .Bind(":id", c.id)
            .Bind(":token", c.attempt_token)
            .Run();
        applied[i] = update.Changes() == 1;
      }
      tx.Commit();
      return applied;
    });
  }

  Result<std::vector<RescuedJob>> RescueExpiredJobs(const RescueExpiredJobsParams& params) override {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    return Guard([&](Connection& conn) -> Result<std::vector<RescuedJob>> {
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      std::vector<RescuedJob> rescued;
      {
        Stmt row(conn, sql::kRescueExpiredJobs);
        row.Bind(":now", now)
            .Bind(":expired_before", Earlier(now, params.expired_before))
            .Bind(":base_ms", duration_cast<milliseconds>(params.backoff_base).count())
            .Bind(":max_ms", duration_cast<milliseconds>(params.backoff_max).count())
            .Bind(":error", kJobTimedOutError)
            .Bind(":spare_tokens", IdsJson(params.spare_tokens));
        while (row.Step()) {
          const auto status = ParseJobStatus(row.Text(1));
          rescued.push_back({row.Text(0), status.value_or(JobStatus::kFailed), static_cast<int>(row.Int(2))});
        }
      }
      tx.Commit();
      std::sort(rescued.begin(), rescued.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      return rescued;
    });
  }

  Result<long> RenewJobLeases(const RenewJobLeasesParams& params) override {
    if (params.tokens.empty()) return 0L;
    return Guard([&](Connection& conn) -> Result<long> {
      const std::string now = Now(conn);
      Stmt update(conn, sql::kRenewJobLeases);
      update.Bind(":now", now)
          .Bind(":lease", OffsetModifier(params.lease))
          .Bind(":tokens", IdsJson(params.tokens))
          .Run();
      return static_cast<long>(update.Changes());
    });
  }

  Status RetryJob(const RetryJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    std::string queue;
    Status status = Guard([&](Connection& conn) -> Status {
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      std::string current;
      std::optional<std::string> unique_key;
      {
        Stmt row(conn, sql::kJobStatusAndKey);
        row.Bind(":id", params.id);
        if (!row.Step()) return NoSuchJob(params.id);
        current = row.Text(0);
        unique_key = row.OptText(1);
        queue = row.Text(2);
      }
      if (current != "failed" && current != "frozen") {
        return ConflictError("Job " + params.id + " is " + current +
                             ", only failed or frozen jobs can be retried");
      }
      if (unique_key && current == "frozen") {
        Stmt live(conn, sql::kFindLiveJobByKey);
        live.Bind(":unique_key", *unique_key);
        if (live.Step()) {
          return ConflictError("Job " + params.id + " cannot be retried: job " + live.Text(0) +
                               " holds its unique key " + *unique_key);
        }
      }
      Stmt(conn, sql::kRetryJob).Bind(":id", params.id).Bind(":now", now).Run();
      tx.Commit();
      return Status::Ok();
    });
    if (status.ok()) hub_->Publish(kJobsChannel, queue);
    return status;
  }

  Status CancelJob(const CancelJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    return Guard([&](Connection& conn) -> Status {
      ImmediateTransaction tx(conn);
      const std::string now = Now(conn);
      Stmt update(conn, sql::kCancelJob);
      update.Bind(":id", params.id).Bind(":now", now).Bind(":error", kJobCancelledError).Run();
      const bool cancelled = update.Changes() == 1;
      std::string current;
      if (!cancelled) {
        Stmt row(conn, sql::kJobStatusAndKey);
        row.Bind(":id", params.id);
        if (!row.Step()) return NoSuchJob(params.id);
        current = row.Text(0);
      }
      tx.Commit();
      if (cancelled) return Status::Ok();
      if (current == "running") return ConflictError("Job " + params.id + " is currently running");
      return ConflictError("Job " + params.id + " has already finished");
    });
  }

  Result<JobInfo> GetJob(std::string_view id) override {
    if (!IsJobId(id)) return NoSuchJob(id);
    return Guard([&](Connection& conn) -> Result<JobInfo> {
      Stmt row(conn, sql::kGetJob);
      row.Bind(":id", id);
      if (!row.Step()) return NoSuchJob(id);
      return ReadJobRow(row);
    });
  }

  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override {
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ListJobs: limit must be 1..1000, got " + std::to_string(params.limit));
    }
    if (params.offset < 0) return InvalidArgumentError("ListJobs: offset must be >= 0");
    return Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      Stmt row(conn, sql::kListJobs);
      if (params.status) {
        row.Bind(":status", JobStatusName(*params.status));
      } else {
        row.BindNull(":status");
      }
      row.BindOpt(":queue", params.queue)
          .BindOpt(":kind", params.kind)
          .Bind(":limit", std::int64_t{params.limit})
          .Bind(":offset", std::int64_t{params.offset});
      if (params.payload_budget) {
        row.Bind(":budget", std::max<std::int64_t>(0, *params.payload_budget));
      } else {
        row.BindNull(":budget");
      }
      std::vector<JobInfo> jobs;
      while (row.Step()) {
        jobs.push_back(ReadJobRow(row));
        if (!row.OptText(3)) jobs.back().omitted_payload_bytes = row.Int(17);
      }
      return jobs;
    });
  }

  Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) override {
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ListFailedJobs: limit must be 1..1000, got " +
                                  std::to_string(params.limit));
    }
    return Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      Stmt row(conn, sql::kListFailedJobs);
      row.BindOpt(":queue", params.queue).Bind(":limit", std::int64_t{params.limit});
      std::vector<JobInfo> jobs;
      while (row.Step()) jobs.push_back(ReadJobRow(row));
      return jobs;
    });
  }

  Result<std::vector<JobStatusCount>> SummarizeJobs() override {
    return Guard([&](Connection& conn) -> Result<std::vector<JobStatusCount>> {
      const std::string now = Now(conn);
      std::vector<JobStatusCount> counts;
      Stmt row(conn, sql::kJobSummary);
      row.Bind(":now", now);
      while (row.Step()) {
        JobStatusCount line;
        line.queue = row.Text(0);
        const auto status = ParseJobStatus(row.Text(1));
        if (!status) Fail(InternalError("unknown job status '" + row.Text(1) + "'"));
        line.status = *status;
        line.count = row.Int(2);
        line.oldest_scheduled_at = row.Time(3);
        if (!row.IsNull(4)) line.average_delay = std::chrono::milliseconds(row.Int(4));
        counts.push_back(std::move(line));
      }
      std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
        return std::tie(a.queue, a.status) < std::tie(b.queue, b.status);
      });
      return counts;
    });
  }

  Result<JobStats> ComputeJobStats(const JobStatsFilter& params) override {
    return Guard([&](Connection& conn) -> Result<JobStats> {
      OCTOP_ASSIGN_OR_RETURN(JobStats stats, JobStatsGrid(params, ParseNow(Now(conn))));
      const auto bucket_ms = std::chrono::duration_cast<std::chrono::milliseconds>(params.bucket).count();
      Stmt row(conn, sql::kJobStats);
      row.Bind(":from", FormatTime(stats.from))
          .Bind(":to", FormatTime(stats.to))
          .Bind(":bucket_ms", std::int64_t{bucket_ms})
          .BindOpt(":queue", params.queue)
          .BindOpt(":kind", params.kind);
      const auto ms = [&](int col) -> std::optional<std::chrono::microseconds> {
        if (row.IsNull(col)) return std::nullopt;
        return std::chrono::milliseconds(row.Int(col));
      };
      while (row.Step()) {
        const std::int64_t index = row.Int(0);
        if (index < 0 || index >= static_cast<std::int64_t>(stats.buckets.size())) continue;
        JobStatsBucket& b = stats.buckets[static_cast<std::size_t>(index)];
        b.succeeded = static_cast<long>(row.Int(1));
        b.frozen = static_cast<long>(row.Int(2));
        b.avg_latency = ms(3);
        b.max_latency = ms(4);
        b.avg_run = ms(5);
      }
      return stats;
    });
  }

  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override {
    return Guard([&](Connection& conn) -> Result<std::optional<WallTime>> {
      Stmt row(conn, sql::kNextJobDueAt);
      row.Bind(":queue", queue);
      if (!row.Step()) return std::optional<WallTime>();
      return row.Time(0);
    });
  }

  Status SetQueuePaused(std::string_view queue, bool paused) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", queue));
    Status status = Guard([&](Connection& conn) -> Status {
      const std::string now = Now(conn);
      Stmt(conn, sql::kSetQueuePaused)
          .Bind(":queue", queue)
          .Bind(":paused", std::int64_t{paused ? 1 : 0})
          .Bind(":now", now)
          .Run();
      return Status::Ok();
    });
    if (status.ok() && !paused) hub_->Publish(kJobsChannel, queue);
    return status;
  }

  Result<std::vector<QueueInfo>> ListQueues() override {
    return Guard([&](Connection& conn) -> Result<std::vector<QueueInfo>> {
      Stmt row(conn, sql::kListQueues);
      std::vector<QueueInfo> queues;
      while (row.Step()) queues.push_back({row.Text(0), row.Int(1) != 0});
      return queues;
    });
  }

  Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) override {
    if (params.older_than.count() < 0)
      return InvalidArgumentError("DeleteFinishedJobs: older_than must be >= 0");
    if (params.limit < 1) return InvalidArgumentError("DeleteFinishedJobs: limit must be >= 1");
    nlohmann::json statuses = nlohmann::json::array();
    for (JobStatus s : params.statuses) {
      if (s != JobStatus::kSuccess && s != JobStatus::kFrozen) {
        return InvalidArgumentError("DeleteFinishedJobs: only success and frozen jobs can be deleted, not " +
                                    std::string(JobStatusName(s)));
      }
      statuses.push_back(std::string(JobStatusName(s)));
    }
    if (statuses.empty()) return 0L;
    return Guard([&](Connection& conn) -> Result<long> {
      const std::string now = Now(conn);
      const std::string cutoff = JobTimeAfter(conn, now, -params.older_than);
      Stmt del(conn, sql::kDeleteFinishedJobs);
      del.Bind(":statuses", statuses.dump())
          .Bind(":cutoff", cutoff)
          .Bind(":limit", std::int64_t{params.limit});
      del.Run();
      return static_cast<long>(del.Changes());
    });
  }

  Result<std::optional<std::string>> GetConfig(std::string_view key) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    return Guard([&](Connection& conn) -> Result<std::optional<std::string>> {
      Stmt row(conn, sql::kGetConfig);
      row.Bind(":key", key);
      if (!row.Step()) return std::optional<std::string>();
      return std::optional<std::string>(row.Text(0));
    });
  }

  Status SetConfig(std::string_view key, std::string_view value_json) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    if (!IsStorableText(value_json) || !nlohmann::json::accept(value_json)) {
      return InvalidArgumentError("config value for " + std::string(key) + " is not valid JSON");
    }
    Status status = Guard([&](Connection& conn) -> Status {
      const std::string now = Now(conn);
      Stmt(conn, sql::kSetConfig).Bind(":key", key).Bind(":value", value_json).Bind(":now", now).Run();
      return Status::Ok();
    });
    if (status.ok()) hub_->Publish(kConfigChannel, key);
    return status;
  }

  Result<std::vector<ConfigEntry>> ListConfig() override {
    return Guard([&](Connection& conn) -> Result<std::vector<ConfigEntry>> {
      Stmt row(conn, sql::kListConfig);
      std::vector<ConfigEntry> entries;
      while (row.Step()) entries.push_back({row.Text(0), row.Text(1), row.Time(2).value_or(WallTime{})});
      return entries;
    });
  }

  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    if (channels.empty()) return InvalidArgumentError("Listen needs at least one channel");
    return std::unique_ptr<Listener>(
        std::make_unique<SqliteListener>(hub_, hub_->Subscribe(std::move(channels))));
  }

 private:
  // Runs `fn` on a leased connection, turning failures into a Status.
  template <typename Fn>
  auto Guard(Fn&& fn) -> decltype(fn(std::declval<Connection&>())) {
    try {
      auto lease = pool_.Acquire();
      return fn(*lease);
    } catch (const SqliteFailure& e) {
      return e.status();
    } catch (const std::exception& e) {
      return InternalError(std::string("SQLite backend: ") + e.what());
    }
  }

  // The database's now as text: the test clock's override, or SQLite's own clock.
  std::string Now(Connection& conn) const {
    if (const auto now = clock_->DatabaseNowOverride()) return FormatTime(*now);
    Stmt row(conn, sql::kDatabaseNow);
    if (!row.Step()) Fail(InternalError("DatabaseNow returned no row"));
    return row.Text(0);
  }

  // The earlier of the database's now (as written) and `bound`, as text that compares with stored times.
  static std::string Earlier(const std::string& now, const std::optional<WallTime>& bound) {
    return bound ? std::min(now, FormatTime(*bound)) : now;
  }

  static WallTime ParseNow(const std::string& now) {
    const auto t = ParseTime(now);
    if (!t) Fail(InternalError("unreadable database time '" + now + "'"));
    return *t;
  }

  // A TimeSpec other than FixedRateAfter as the text to store (nullopt = NULL).
  static std::optional<std::string> Resolve(Connection& conn, const TimeSpec& spec, const std::string& now) {
    if (const auto* plus = std::get_if<DbNowPlus>(&spec)) {
      if (plus->offset.count() == 0) return now;
      Stmt row(conn, sql::kNowPlus);
      row.BindNull(":at").Bind(":now", now).Bind(":offset", OffsetModifier(plus->offset));
      if (!row.Step()) Fail(InternalError("NowPlus returned no row"));
      return row.OptText(0);
    }
    if (const auto* at = std::get_if<AbsoluteTime>(&spec)) return FormatTime(at->at);
    if (std::holds_alternative<FixedRateAfter>(spec)) {
      Fail(InvalidArgumentError("FixedRateAfter is only meaningful when releasing a task"));
    }
    return std::nullopt;
  }

  // The :period / :next_at pair of ReleaseTask and CancelTask: a fixed rate is computed in SQL from the row's
  // previous value; anything else is resolved here.
  static void BindNextRun(Connection& conn, Stmt& row, const TimeSpec& next_run, const std::string& now) {
    if (const auto* rate = std::get_if<FixedRateAfter>(&next_run)) {
      row.Bind(":period", OffsetModifier(rate->period)).BindNull(":next_at");
    } else {
      row.BindNull(":period").BindOpt(":next_at", Resolve(conn, next_run, now));
    }
  }

  static bool Exists(Connection& conn, const std::string& id) {
    Stmt row(conn, sql::kTaskExists);
    row.Bind(":id", id);
    return row.Step();
  }

  const Clock* clock_;
  ConnectionPool pool_;
  std::shared_ptr<Hub> hub_;
};

// A namespace becomes a file name, so it is kept to characters that are safe in one.
Status ValidateNamespace(const std::string& ns) {
  const bool ok =
      !ns.empty() && ns.size() <= 128 && ns.front() != '.' && std::all_of(ns.begin(), ns.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '-' || c == '.';
      });
  if (ok) return Status::Ok();
  return InvalidArgumentError("namespace '" + ns +
                              "' cannot name an SQLite file: use letters, digits, '_', '-', '.'");
}

// A database file of 0 bytes with no write-ahead log beside it holds nothing; SQLite would open it as a new,
// empty database. When it is older than a first open takes (another node creating it at this moment), it was
// most likely truncated: starting on it would hide every task and job it held, so that is refused.
Status RefuseTruncatedFile(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size != 0) return Status::Ok();
  const auto wal = std::filesystem::file_size(file.string() + "-wal", ec);
  if (!ec && wal > 0) return Status::Ok();
  const auto written = std::filesystem::last_write_time(file, ec);
  if (ec) return Status::Ok();
  // File ages are real time, whatever clock drives the store.
  const auto age = Clock::Real().WallNow() - std::chrono::file_clock::to_sys(written);
  if (age < std::chrono::seconds(10)) return Status::Ok();
  return FailedPreconditionError(
      "SQLite file '" + file.string() +
      "' is empty (0 bytes, no write-ahead log) but was not just created: it may "
      "have been truncated. Restore it from a backup, or delete it to start afresh");
}

}  // namespace

Status ValidateSqliteNamespace(const std::string& ns) { return ValidateNamespace(ns); }

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& location, const StoreOptions& options) {
  if (sqlite3_threadsafe() == 0) return InternalError("libsqlite3 was built without thread support");
  std::unique_ptr<SqliteStore> store;
  if (location == ":memory:") {
    static std::atomic<std::uint64_t> next_memory_db{0};
    store = std::make_unique<SqliteStore>(":memory:", true, "memory:" + std::to_string(next_memory_db++),
                                          options);
  } else {
    OCTOP_RETURN_IF_ERROR(ValidateNamespace(options.ns));
    std::error_code ec;
    std::filesystem::create_directories(location, ec);
    if (ec) return UnavailableError("cannot create SQLite directory '" + location + "': " + ec.message());
    const std::filesystem::path file = std::filesystem::path(location) / (options.ns + ".sqlite");
    OCTOP_RETURN_IF_ERROR(RefuseTruncatedFile(file));
    std::filesystem::path canonical = std::filesystem::weakly_canonical(file, ec);
    if (ec) canonical = std::filesystem::absolute(file);
    store = std::make_unique<SqliteStore>(file.string(), false, canonical.string(), options);
  }
  OCTOP_RETURN_IF_ERROR(store->Connect());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace octop::store
