// Daemon: everything octopd runs, built from a DaemonConfig -- the Scheduler with every configured task bound
// to its action (a command or a webhook), the JobQueue with every configured job handler (the same two action
// forms, per job kind), and the ApiServer in front of both.
//
// Lifecycle: Start() opens the database, registers the tasks and starts listening; Stop() drains: the HTTP
// server stops accepting, running jobs get the queue's shutdown grace, every running task gets its stop
// request (commands get SIGTERM, then SIGKILL after their grace), global runs are released, threads are
// joined. A failure in Start() leaves nothing running.
//
// Thread-safety: Start and Stop from one thread (octopd's main thread).
#ifndef OCTOP_DAEMON_DAEMON_H_
#define OCTOP_DAEMON_DAEMON_H_

#include <memory>
#include <string>

#include <octop/queue.h>
#include <octop/scheduler.h>
#include <octop/status.h>

#include "daemon/daemon_config.h"

namespace octop::http {
class ApiServer;
}  // namespace octop::http

namespace octop::daemon {

// The task function that runs `action` for task `task_id` of plugin `plugin_id`. A command gets
// OCTOP_PLUGIN_ID and OCTOP_TASK_ID in its environment; a webhook gets a JSON body {"pluginId","taskId"}. A
// non-zero exit, a non-2xx answer or no answer is a failed run whose error says why.
// `exec_shim`: the octop-exec binary put in front of every command (none when empty; see CommandSpec).
TaskFunction MakeTaskFunction(const ActionConfig& action, std::string plugin_id, std::string task_id,
                              const std::string& exec_shim = "");

// The job handler that runs `action` for jobs of `kind`.
//   command: the payload JSON on stdin; OCTOP_JOB_ID, OCTOP_JOB_KIND, OCTOP_JOB_QUEUE, OCTOP_JOB_ATTEMPT and
//            OCTOP_JOB_MAX_RETRIES in the environment. Exit 0 = Done; exit 75 (EX_TEMPFAIL) = Retry after the
//            backoff; any other exit, a signal or a stop (timeout, shutdown) = Fail with the exit status and
//            the tail of stderr as the error.
//   webhook: the payload JSON as the body (headers X-Octop-Job-Id/-Kind/-Attempt added). 2xx = Done; 429 or
//            503 = Retry, after Retry-After (seconds or an HTTP date) when given; anything else or no
//            answer = Fail.
JobHandler MakeJobHandler(const ActionConfig& action, std::string kind, const std::string& exec_shim = "");

// A Retry-After value at `now`: delta-seconds or an IMF-fixdate ("Wed, 21 Oct 2026 07:28:00 GMT"), clamped to
// 0..kMaxJobRetryAfter whatever its size or year; nullopt when unreadable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::string& value, WallTime now);

class Daemon {
 public:
  // `web_root`: a directory of static files (the dashboard) served at /; empty serves none.
  // `exec_shim`: the octop-exec binary that every command runs under (CommandSpec::exec_shim); none when
  // empty.
  explicit Daemon(DaemonConfig config, std::string web_root = "", std::string exec_shim = "");
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  Status Start();
  void Stop();

  int http_port() const;
  Scheduler& scheduler() { return *scheduler_; }
  JobQueue& jobs() { return *jobs_; }

 private:
  DaemonConfig config_;
  std::string web_root_;
  std::string exec_shim_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<JobQueue> jobs_;
  std::unique_ptr<http::ApiServer> server_;
};

}  // namespace octop::daemon

#endif  // OCTOP_DAEMON_DAEMON_H_
