// octop_job_worker: one job-queue node in a process of its own, for the multi-process tests.
//
//   octop_job_worker --url URL --ns NS --log FILE --ready FILE [--listen-db URL] [--concurrency N]
//   [--timeout-ms N]
//                    [--rescue-interval-ms N] [--rescue-grace-ms N] [--retry-base-ms N]
//                    [--block-first-attempt]
//
// Runs handler "record" on queue "default": each run appends "S <id> <attempt> <pid> <start_ns>" when it
// starts and "E <id> <attempt> <pid> <start_ns> <end_ns>" when it ends (CLOCK_MONOTONIC, shared by every
// process of the machine), one write(2) per line on an O_APPEND file, so a SIGKILL loses nothing written
// before it. With
// --block-first-attempt a first attempt blocks until its stop_token fires (a hung worker). Creates the
// --ready file once started; SIGTERM shuts down gracefully (exit 0).
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <octop/queue.h>

#include "runtime/job_queue_opener.h"
#include "store/job_store.h"

namespace {

std::int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void WriteLine(int fd, const std::string& line) {
  const ssize_t n = ::write(fd, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) std::perror("octop_job_worker: write");
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, ns, log_path, ready_path, listen_db;
  int concurrency = 8;
  long timeout_ms = 60000, rescue_ms = 15000, grace_ms = 5000, retry_base_ms = 1000;
  bool block_first = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "octop_job_worker: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--url")
      url = value();
    else if (arg == "--ns")
      ns = value();
    else if (arg == "--listen-db")
      listen_db = value();
    else if (arg == "--log")
      log_path = value();
    else if (arg == "--ready")
      ready_path = value();
    else if (arg == "--concurrency")
      concurrency = std::stoi(value());
    else if (arg == "--timeout-ms")
      timeout_ms = std::stol(value());
    else if (arg == "--rescue-interval-ms")
      rescue_ms = std::stol(value());
    else if (arg == "--rescue-grace-ms")
      grace_ms = std::stol(value());
    else if (arg == "--retry-base-ms")
      retry_base_ms = std::stol(value());
    else if (arg == "--block-first-attempt")
      block_first = true;
    else {
      std::cerr << "octop_job_worker: unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (url.empty() || ns.empty() || log_path.empty() || ready_path.empty()) {
    std::cerr << "octop_job_worker: --url, --ns, --log and --ready are required\n";
    return 2;
  }
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::perror("octop_job_worker: open --log");
    return 1;
  }
  // SIGTERM is taken by sigwait below: block it before any thread exists so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  octop::JobQueueOptions options;
  options.rescue_interval = std::chrono::milliseconds(rescue_ms);
  options.rescue_grace = std::chrono::milliseconds(grace_ms);
  options.retry.base = std::chrono::milliseconds(retry_base_ms);
  options.worker_id = "pid-" + std::to_string(::getpid());
  options.logger = [](octop::LogLevel level, std::string_view message) {
    if (level >= octop::LogLevel::kWarn) std::cerr << "[" << ::getpid() << "] " << message << "\n";
  };
  auto queue = octop::runtime::JobQueueOpener::Open(options, [url, ns, listen_db](const octop::Clock& clock) {
    octop::store::StoreOptions so;
    so.ns = ns;
    so.clock = &clock;
    so.pool_size = 8;
    // Through a pooler in transaction mode: LISTEN on the direct URL, no named prepared statements
    // (docs/configuration.md, "Behind PgBouncer").
    if (!listen_db.empty()) so.pooling = {.prepared_statements = false, .listen_url = listen_db};
    return octop::store::OpenJobStore(url, so);
  });
  if (!queue.ok()) {
    std::cerr << "octop_job_worker: " << queue.status().ToString() << "\n";
    return 1;
  }
  const std::string pid = std::to_string(::getpid());
  octop::Status s =
      (*queue)->RegisterHandler("record",
                                [&](const octop::JobContext& ctx) {
                                  const std::int64_t start = MonotonicNs();
                                  const std::string run = ctx.id + " " + std::to_string(ctx.attempt) + " " +
                                                          pid + " " + std::to_string(start);
                                  WriteLine(log_fd, "S " + run + "\n");
                                  if (block_first && ctx.attempt == 1) {
                                    std::mutex mu;
                                    std::condition_variable_any cv;
                                    std::unique_lock lock(mu);
                                    cv.wait(lock, ctx.stop_token, [] { return false; });
                                    return octop::JobResult::Fail("stopped");
                                  }
                                  WriteLine(log_fd, "E " + run + " " + std::to_string(MonotonicNs()) + "\n");
                                  return octop::JobResult::Done();
                                },
                                {.timeout = std::chrono::milliseconds(timeout_ms)});
  if (s.ok()) s = (*queue)->AddWorkers("default", concurrency);
  if (s.ok()) s = (*queue)->Start();
  if (!s.ok()) {
    std::cerr << "octop_job_worker: " << s.ToString() << "\n";
    return 1;
  }
  std::ofstream(ready_path) << pid << "\n";
  int sig = 0;
  sigwait(&signals, &sig);
  (*queue)->Shutdown();
  ::close(log_fd);
  return 0;
}
