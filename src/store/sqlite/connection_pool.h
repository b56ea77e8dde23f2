// ConnectionPool: up to a fixed number of SQLite connections to one database file, opened on demand and
// reused. An operation leases one connection for its duration (docs/store.md, "Connections, time and
// notifications").
//
// Thread-safety: Acquire may be called from any number of threads; a Lease is used by one thread.
#ifndef OCTOP_STORE_SQLITE_CONNECTION_POOL_H_
#define OCTOP_STORE_SQLITE_CONNECTION_POOL_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/sqlite/connection.h"

namespace octop::store::sqlite {

// Up to `max_size` connections to one database, opened on demand and reused.
class ConnectionPool {
 public:
  ConnectionPool(std::string path, bool in_memory, int max_size, std::chrono::milliseconds busy_timeout)
      : path_(std::move(path)), in_memory_(in_memory), max_size_(max_size), busy_timeout_(busy_timeout) {}

  const std::string& path() const { return path_; }
  bool in_memory() const { return in_memory_; }

  // One connection, returned to the pool when the lease is destroyed.
  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (conn_ != nullptr) pool_->Return(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // An idle connection, or a new one while fewer than `max_size` are open (waiting for one to come back
  // otherwise). kUnavailable when a new connection cannot be opened.
  Result<Lease> Acquire();

 private:
  void Return(std::unique_ptr<Connection> conn) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(conn));
    available_.notify_one();
  }

  // A new connection, configured (WAL unless in memory, the busy handler, connection.sql's pragmas).
  Result<std::unique_ptr<Connection>> OpenConnection();
  Status EnableWal(Connection& conn);

  const std::string path_;
  const bool in_memory_;
  const int max_size_;
  const std::chrono::milliseconds busy_timeout_;
  std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  int open_ = 0;                                   // guarded by mu_
};

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_CONNECTION_POOL_H_
