// PgListener: the PostgreSQL Listener -- a dedicated connection (never one of the pool's) that LISTENs on
// channels.
//
// Notifications are scoped to the Store's namespace: the backend sends "<ns>/<payload>" (see PgNotifyPrefix),
// and this listener returns only those with its own prefix, stripped. Wait() sleeps in poll() on the libpq
// socket and an eventfd that a std::stop_callback writes to, so a stop request ends the wait at once. A
// broken connection makes Wait() return kUnavailable; the next Wait() reconnects and LISTENs again
// (notifications sent in between are lost, which is why callers also poll).
//
// Ownership: owns its connection and eventfd. Thread-safety: one thread at a time (the stop callback, run by
// the thread requesting the stop, only writes to the eventfd).
#ifndef OCTOP_STORE_POSTGRES_PG_LISTENER_H_
#define OCTOP_STORE_POSTGRES_PG_LISTENER_H_

#include <memory>
#include <string>
#include <vector>

#include "store/postgres/pg_connection.h"
#include "store/store.h"

namespace octop::store::postgres {

// The payload prefix every notification of namespace `ns` carries.
std::string PgNotifyPrefix(std::string_view ns);

class PgListener final : public Listener {
 public:
  // Connects and LISTENs; kUnavailable when the server cannot be reached.
  static Result<std::unique_ptr<PgListener>> Open(std::string conninfo, std::string ns,
                                                  std::vector<std::string> channels);
  ~PgListener() override;

  Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) override;

  // The listening connection's server pid, or 0 while disconnected (tests terminate it).
  int backend_pid() const { return conn_ ? conn_->backend_pid() : 0; }

 private:
  PgListener(std::string conninfo, std::string ns, std::vector<std::string> channels, int wake_fd);
  Status Connect();
  // Moves pending notifications of our namespace into `out`.
  void Drain(std::vector<Notification>& out);

  const std::string conninfo_;
  const std::string prefix_;
  const std::vector<std::string> channels_;
  const int wake_fd_;
  std::unique_ptr<PgConnection> conn_;
};

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_PG_LISTENER_H_
