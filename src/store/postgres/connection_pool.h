// ConnectionPool: at most `size` PgConnections to one server, handed out one caller at a time.
//
// Connections are opened lazily (the first one by OpenPostgresStore, to report an unreachable server early)
// and reused most-recently-returned first. A connection that comes back broken is closed, and so are the idle
// ones: a broken connection usually means the server restarted or terminated our backends, so the idle ones
// are dead too and would each fail one more call. The next Acquire() then opens a fresh connection. A
// connection returned inside an open or failed transaction is rolled back (or closed if that fails), so no
// caller inherits another's transaction.
//
// Ownership: the pool owns idle connections; a Lease owns its connection until it is destroyed, which returns
// it. Leases must not outlive the pool. Thread-safety: Acquire() may be called from any number of threads;
// waiting for a free connection blocks (up to acquire_timeout, then kUnavailable).
#ifndef OCTOP_STORE_POSTGRES_CONNECTION_POOL_H_
#define OCTOP_STORE_POSTGRES_CONNECTION_POOL_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <octop/status.h>

#include "store/postgres/pg_connection.h"

namespace octop::store::postgres {

class ConnectionPool {
 public:
  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<PgConnection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (conn_) pool_->Return(std::move(conn_));
    }
    PgConnection* operator->() { return conn_.get(); }
    PgConnection& operator*() { return *conn_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // prepared_statements: as PgConnection::Open takes it, for every connection of the pool.
  ConnectionPool(std::string conninfo, int size, bool prepared_statements = true,
                 std::chrono::milliseconds acquire_timeout = std::chrono::seconds(30));

  Result<Lease> Acquire();

  // Connections currently open (idle + leased). For tests and diagnostics.
  int open_connections() const;

 private:
  void Return(std::unique_ptr<PgConnection> conn);

  const std::string conninfo_;
  const int size_;
  const bool prepared_statements_;
  const std::chrono::milliseconds acquire_timeout_;
  mutable std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // guarded by mu_
  int open_ = 0;                                     // guarded by mu_; includes connections being opened
};

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_CONNECTION_POOL_H_
