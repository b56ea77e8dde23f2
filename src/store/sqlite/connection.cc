#include "store/sqlite/connection.h"

#include <thread>
#include <utility>

#include "store/sqlite/sqlite_time.h"

namespace octop::store::sqlite {

Status SqliteError(sqlite3* db, int rc, std::string_view doing) {
  const std::string detail =
      std::string(doing) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError("SQLite database is locked (busy timeout passed), " + detail);
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_PROTOCOL:
    case SQLITE_READONLY:
      return UnavailableError("SQLite " + detail);
    case SQLITE_CONSTRAINT:
      return InvalidArgumentError("SQLite constraint failed, " + detail);
    default:
      return InternalError("SQLite " + detail);
  }
}

// ---- Connection -------------------------------------------------------------------------------------------

Connection::~Connection() {
  for (auto& [text, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

void Connection::WaitForLocksUpTo(std::chrono::milliseconds timeout) {
  busy_timeout_ = timeout;
  sqlite3_busy_handler(db_, &Connection::OnBusy, this);
}

int Connection::OnBusy(void* self, int tries) {
  auto* conn = static_cast<Connection*>(self);
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) conn->busy_since_ = now;
  if (now - conn->busy_since_ >= conn->busy_timeout_) return 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 1;
}

Result<sqlite3_stmt*> Connection::Prepare(std::string_view text) {
  if (auto it = cache_.find(text.data()); it != cache_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, text.data(), static_cast<int>(text.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "preparing a statement");
  cache_.emplace(text.data(), stmt);
  return stmt;
}

Status Connection::Exec(std::string_view script) {
  const std::string text(script);
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return Status::Ok();
  const std::string message = error != nullptr ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  return SqliteError(nullptr, rc, message);
}

// ---- Stmt -------------------------------------------------------------------------------------------------

Stmt::Stmt(Connection& conn, std::string_view text) : conn_(conn) {
  Result<sqlite3_stmt*> prepared = conn.Prepare(text);
  if (prepared.ok()) {
    stmt_ = *prepared;
  } else {
    status_ = prepared.status();
  }
}

Stmt::~Stmt() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Stmt& Stmt::Bind(const char* name, std::string_view value) {
  if (const int index = Index(name); index > 0) {
    Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
          "binding a parameter");
  }
  return *this;
}

Stmt& Stmt::Bind(const char* name, std::int64_t value) {
  if (const int index = Index(name); index > 0)
    Check(sqlite3_bind_int64(stmt_, index, value), "binding a parameter");
  return *this;
}

Stmt& Stmt::BindNull(const char* name) {
  if (const int index = Index(name); index > 0) Check(sqlite3_bind_null(stmt_, index), "binding a parameter");
  return *this;
}

Stmt& Stmt::BindOpt(const char* name, const std::optional<std::string>& value) {
  if (!value) return BindNull(name);
  return Bind(name, std::string_view(*value));
}

bool Stmt::Step() {
  if (!status_.ok()) return false;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) status_ = SqliteError(conn_.db(), rc, "running a statement");
  return false;
}

Status Stmt::Run() {
  while (Step()) {
  }
  return status_;
}

std::string Stmt::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::optional<std::string> Stmt::OptText(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Text(col);
}

std::optional<WallTime> Stmt::Time(int col) {
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
        return std::nullopt;
      }
      return WallTime{} + std::chrono::milliseconds(static_cast<std::int64_t>(ms));
    }
    default:
      break;
  }
  const std::string text = Text(col);
  if (auto t = ParseTime(text)) return t;
  Fail(InternalError("unreadable datetime '" + text + "' in column " + sqlite3_column_name(stmt_, col)));
  return std::nullopt;
}

void Stmt::Fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

int Stmt::Index(const char* name) {
  if (!status_.ok()) return 0;
  const int index = sqlite3_bind_parameter_index(stmt_, name);
  if (index == 0) Fail(InternalError(std::string("SQL statement has no parameter ") + name));
  return index;
}

void Stmt::Check(int rc, std::string_view doing) {
  if (rc != SQLITE_OK) Fail(SqliteError(conn_.db(), rc, doing));
}

// ---- ImmediateTransaction ---------------------------------------------------------------------------------

ImmediateTransaction::~ImmediateTransaction() {
  if (open_) sqlite3_exec(conn_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
}

Status ImmediateTransaction::Begin() {
  OCTOP_RETURN_IF_ERROR(conn_.Exec("BEGIN IMMEDIATE"));
  open_ = true;
  return Status::Ok();
}

Status ImmediateTransaction::Commit() {
  OCTOP_RETURN_IF_ERROR(conn_.Exec("COMMIT"));
  open_ = false;
  return Status::Ok();
}

}  // namespace octop::store::sqlite
