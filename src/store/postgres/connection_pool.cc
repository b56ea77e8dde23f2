#include "store/postgres/connection_pool.h"

#include <algorithm>
#include <utility>

namespace octop::store::postgres {

ConnectionPool::ConnectionPool(std::string conninfo, int size, bool prepared_statements,
                               std::chrono::milliseconds acquire_timeout)
    : conninfo_(std::move(conninfo)),
      size_(std::max(1, size)),
      prepared_statements_(prepared_statements),
      acquire_timeout_(acquire_timeout) {}

Result<ConnectionPool::Lease> ConnectionPool::Acquire() {
  std::unique_lock lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + acquire_timeout_;
  while (idle_.empty() && open_ >= size_) {
    if (available_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= size_) {
      return UnavailableError("PostgreSQL: no free connection in the pool (size " + std::to_string(size_) +
                              ") within " + std::to_string(acquire_timeout_.count()) + " ms");
    }
  }
  if (!idle_.empty()) {
    std::unique_ptr<PgConnection> conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(conn));
  }
  ++open_;  // reserve the slot, then connect without holding the lock
  lock.unlock();
  Result<std::unique_ptr<PgConnection>> conn = PgConnection::Open(conninfo_, prepared_statements_);
  if (!conn.ok()) {
    lock.lock();
    --open_;
    available_.notify_one();
    return conn.status();
  }
  return Lease(this, std::move(conn).value());
}

void ConnectionPool::Return(std::unique_ptr<PgConnection> conn) {
  // A connection that cannot be brought back to a clean state is not reused (checked below).
  if (!conn->broken() && conn->in_transaction()) (void)conn->Exec("ROLLBACK");
  bool keep = !conn->broken() && !conn->in_transaction();
  std::vector<std::unique_ptr<PgConnection>> dead;
  {
    std::lock_guard lock(mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
      dead.swap(idle_);
      open_ -= static_cast<int>(dead.size());
    }
  }
  available_.notify_all();
  // Closing happens outside the lock: PQfinish may write a terminate message to the socket.
  dead.clear();
  conn.reset();
}

int ConnectionPool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

}  // namespace octop::store::postgres
