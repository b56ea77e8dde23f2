#include "store/postgres/pg_listener.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace octop::store::postgres {

std::string PgNotifyPrefix(std::string_view ns) { return std::string(ns) + "/"; }

Result<std::unique_ptr<PgListener>> PgListener::Open(std::string conninfo, std::string ns,
                                                     std::vector<std::string> channels) {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return InternalError(std::string("eventfd: ") + std::strerror(errno));
  std::unique_ptr<PgListener> listener(
      new PgListener(std::move(conninfo), std::move(ns), std::move(channels), fd));
  OCTOP_RETURN_IF_ERROR(listener->Connect());
  return listener;
}

PgListener::PgListener(std::string conninfo, std::string ns, std::vector<std::string> channels, int wake_fd)
    : conninfo_(std::move(conninfo)),
      prefix_(PgNotifyPrefix(ns)),
      channels_(std::move(channels)),
      wake_fd_(wake_fd) {}

PgListener::~PgListener() { close(wake_fd_); }

Status PgListener::Connect() {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Open(conninfo_));
  std::string sql;
  for (const std::string& channel : channels_) sql += "LISTEN " + QuoteIdentifier(channel) + ";";
  if (!sql.empty()) OCTOP_RETURN_IF_ERROR(conn->Exec(sql));
  conn_ = std::move(conn);
  return Status::Ok();
}

void PgListener::Drain(std::vector<Notification>& out) {
  while (PGnotify* n = PQnotifies(conn_->raw())) {
    std::string_view payload = n->extra != nullptr ? n->extra : "";
    if (payload.starts_with(prefix_)) {
      out.push_back({n->relname, std::string(payload.substr(prefix_.size()))});
    }
    PQfreemem(n);
  }
}

Result<std::vector<Notification>> PgListener::Wait(std::chrono::milliseconds timeout, std::stop_token stop) {
  if (!conn_ || conn_->broken()) {
    conn_.reset();
    OCTOP_RETURN_IF_ERROR(Connect());
  }
  std::vector<Notification> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::stop_callback wake(stop, [fd = wake_fd_] {
    std::uint64_t one = 1;
    ssize_t written = write(fd, &one, sizeof one);
    (void)written;  // EAGAIN means a wake-up is already pending, which is as good
  });
  auto clear_wake = [this] {
    std::uint64_t count = 0;
    ssize_t got = read(wake_fd_, &count, sizeof count);
    (void)got;
  };
  while (true) {
    // Notifications can already sit in libpq's buffer (read along with an earlier result).
    if (PQconsumeInput(conn_->raw()) == 0 || conn_->broken()) {
      Status failure = conn_->FailureStatus(nullptr, "listen");
      conn_.reset();
      clear_wake();
      return UnavailableError(failure.message());
    }
    Drain(out);
    if (!out.empty() || stop.stop_requested()) break;
    auto remaining =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) break;
    pollfd fds[2] = {{PQsocket(conn_->raw()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready =
        poll(fds, 2, static_cast<int>(std::min<std::chrono::milliseconds::rep>(remaining.count(), 60000)));
    if (ready < 0 && errno != EINTR) {
      clear_wake();
      return InternalError(std::string("poll: ") + std::strerror(errno));
    }
  }
  clear_wake();
  return out;
}

}  // namespace octop::store::postgres
