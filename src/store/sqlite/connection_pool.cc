#include "store/sqlite/connection_pool.h"

#include <algorithm>
#include <thread>

#include "sqlite_queries.h"

namespace octop::store::sqlite {

Result<ConnectionPool::Lease> ConnectionPool::Acquire() {
  std::unique_lock lock(mu_);
  available_.wait(lock, [&] { return !idle_.empty() || open_ < max_size_; });
  if (!idle_.empty()) {
    std::unique_ptr<Connection> conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(conn));
  }
  ++open_;
  lock.unlock();
  Result<std::unique_ptr<Connection>> opened = OpenConnection();
  if (!opened.ok()) {
    lock.lock();
    --open_;
    available_.notify_one();
    return opened.status();
  }
  return Lease(this, std::move(opened).value());
}

Result<std::unique_ptr<Connection>> ConnectionPool::OpenConnection() {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path_.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return UnavailableError("cannot open SQLite database '" + path_ + "': " + message);
  }
  auto conn = std::make_unique<Connection>(db);
  sqlite3_extended_result_codes(db, 1);
  conn->WaitForLocksUpTo(busy_timeout_);
  if (!in_memory_) OCTOP_RETURN_IF_ERROR(EnableWal(*conn));
  OCTOP_RETURN_IF_ERROR(conn->Exec(sql::kConfigureConnection));
  return conn;
}

// Switching a new file to WAL needs an exclusive lock; when several processes open it at once the switch
// can report SQLITE_BUSY without consulting the busy handler, so it is retried until the busy timeout.
Status ConnectionPool::EnableWal(Connection& conn) {
  const auto deadline = std::chrono::steady_clock::now() + busy_timeout_;
  for (auto pause = std::chrono::milliseconds(1);;
       pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    Status enabled = conn.Exec(sql::kEnableWal);
    if (enabled.ok() || enabled.code() != StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= deadline) {
      return enabled;
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace octop::store::sqlite
