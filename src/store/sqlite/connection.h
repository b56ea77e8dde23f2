// The SQLite backend's connection layer: one sqlite3 connection with its cache of prepared statements
// (Connection), one use of a statement (Stmt), and BEGIN IMMEDIATE as a scope (ImmediateTransaction).
//
// Errors: a failing call throws SqliteFailure carrying the Status to return; the stores turn it into that
// Status at their edge (SqliteNamespace::Guard), so no exception leaves the backend.
//
// Thread-safety: a Connection, and the Stmts on it, are used by one thread at a time (the pool leases each
// to one operation).
#ifndef OCTOP_STORE_SQLITE_CONNECTION_H_
#define OCTOP_STORE_SQLITE_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include <sqlite3.h>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/sqlite/sqlite_time.h"

namespace octop::store::sqlite {

// ---- Errors -----------------------------------------------------------------------------------------------

class SqliteFailure : public std::exception {
 public:
  explicit SqliteFailure(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

[[noreturn]] inline void Fail(Status status) { throw SqliteFailure(std::move(status)); }

[[noreturn]] inline void FailSqlite(sqlite3* db, int rc, std::string_view context) {
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
  explicit ImmediateTransaction(Connection& conn) : conn_(conn) { conn_.Exec("BEGIN IMMEDIATE"); }
  ImmediateTransaction(const ImmediateTransaction&) = delete;
  ImmediateTransaction& operator=(const ImmediateTransaction&) = delete;
  ~ImmediateTransaction() {
    if (!done_) sqlite3_exec(conn_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void Commit() {
    conn_.Exec("COMMIT");
    done_ = true;
  }

 private:
  Connection& conn_;
  bool done_ = false;
};

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_CONNECTION_H_
