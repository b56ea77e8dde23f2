// The SQLite backend's connection layer: one sqlite3 connection with its cache of prepared statements
// (Connection), one use of a statement (Stmt), and BEGIN IMMEDIATE as a scope (ImmediateTransaction).
//
// Errors: Status, as everywhere at the store seam; nothing throws. A Stmt keeps its first failure, like a
// leveldb iterator: binds after a failure do nothing, Step() returns false, and status() says why. So a
// caller steps until false and then returns status() (docs/store.md, "Shape").
//
// Thread-safety: a Connection, and the Stmts on it, are used by one thread at a time (the pool leases each
// to one operation).
#ifndef OCTOP_STORE_SQLITE_CONNECTION_H_
#define OCTOP_STORE_SQLITE_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <sqlite3.h>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop::store::sqlite {

// The Status of SQLite result code `rc` from a call made `doing` something: kUnavailable for a lock wait
// that passed the busy timeout, I/O, a full disk or a read-only file (the next call may work);
// kInvalidArgument for a constraint; kInternal otherwise.
Status SqliteError(sqlite3* db, int rc, std::string_view doing);

// One sqlite3 connection and its prepared statements. Used by one thread at a time (the pool guarantees it).
class Connection {
 public:
  explicit Connection(sqlite3* db) : db_(db) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* db() const { return db_; }

  // Lock waits retry every millisecond until `timeout` has passed since the first try. SQLite's own busy
  // timeout backs off to a retry every 100 ms, so the connection that has waited longest polls least often
  // and loses the lock to newer ones: under load it starved past the whole timeout while other processes
  // took turns (docs/store.md, "Connections, time and notifications").
  void WaitForLocksUpTo(std::chrono::milliseconds timeout);

  // The cached statement of `text`; the statements are the embedded constants, so their address identifies
  // them.
  Result<sqlite3_stmt*> Prepare(std::string_view text);

  // Runs a constant script of one or more statements (migrations, pragmas, transaction control).
  Status Exec(std::string_view script);

 private:
  static int OnBusy(void* self, int tries);

  sqlite3* db_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
  std::chrono::milliseconds busy_timeout_{0};
  std::chrono::steady_clock::time_point busy_since_;  // the first try of the current wait
};

// One use of a cached statement: bind by name, step, read columns; reset and unbound when it goes out of
// scope. Keeps its first failure (see the header comment).
class Stmt {
 public:
  Stmt(Connection& conn, std::string_view text);
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  Stmt& Bind(const char* name, std::string_view value);
  Stmt& Bind(const char* name, std::int64_t value);
  Stmt& BindNull(const char* name);
  Stmt& BindOpt(const char* name, const std::optional<std::string>& value);

  // true: a row is available; false: done, or failed (status() says which).
  bool Step();
  // Steps to the end; the statement's status.
  Status Run();
  const Status& status() const { return status_; }
  int Changes() const { return sqlite3_changes(conn_.db()); }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const;
  std::optional<std::string> OptText(int col) const;
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  // A datetime column: text in any form ParseTime reads, or a number of milliseconds since the epoch (what a
  // JavaScript Date bound by knex turns into). An unreadable value fails the statement (and reads as NULL).
  std::optional<WallTime> Time(int col);

  // Fails the statement with `status` (a row the caller cannot use): Step() returns false from now on.
  void Fail(Status status);

 private:
  int Index(const char* name);
  void Check(int rc, std::string_view doing);

  Connection& conn_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when left without a successful Commit().
class ImmediateTransaction {
 public:
  explicit ImmediateTransaction(Connection& conn) : conn_(conn) {}
  ImmediateTransaction(const ImmediateTransaction&) = delete;
  ImmediateTransaction& operator=(const ImmediateTransaction&) = delete;
  ~ImmediateTransaction();

  // Takes the database's write lock (waiting up to the busy timeout).
  Status Begin();
  Status Commit();

 private:
  Connection& conn_;
  bool open_ = false;
};

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_CONNECTION_H_
