// octop_scheduler_node: one scheduler node as a separate process, for the multi-process test.
//
// Runs one global task on a real clock for --seconds, and appends a line to --out at every run's start and
// end:
//   S <node> <seq> <unix ns>      E <node> <seq> <unix ns>
// Each line is one write() on an O_APPEND file, so lines of concurrent processes never interleave.
//
// Usage: octop_scheduler_node --db URL --plugin P --node N --out FILE [--cadence PT0.2S] [--run-ms 150]
//                             [--timeout PT2S] [--janitor-ms 500] [--seconds 12]
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <octop/scheduler.h>

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

std::int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Append(int fd, const std::string& line) {
  const ssize_t written = write(fd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::perror("write");
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args = {{"--cadence", "PT0.2S"},
                                             {"--run-ms", "150"},
                                             {"--timeout", "PT2S"},
                                             {"--janitor-ms", "500"},
                                             {"--seconds", "12"}};
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required : {"--db", "--plugin", "--node", "--out"}) {
    if (args.count(required) == 0) {
      std::fprintf(stderr, "missing %s\n", required);
      return 2;
    }
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const int fd = open(args["--out"].c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    std::perror("open");
    return 2;
  }
  const std::string node = args["--node"];
  const auto run_for = std::chrono::milliseconds(std::stoll(args["--run-ms"]));

  octop::SchedulerOptions options;
  options.database_url = args["--db"];
  // Through a pooler in transaction mode: --listen-db names the direct URL for LISTEN, and prepared
  // statements go off with it (octop/postgres_pooling.h). Empty: a direct connection.
  if (!args["--listen-db"].empty()) {
    options.pooling = {.prepared_statements = false, .listen_url = args["--listen-db"]};
  }
  // The test's plugin id is a fresh per-test schema of the test database (too long for a database name).
  options.plugin_division.mode = octop::PluginDivision::Mode::kSchema;
  options.janitor_interval = std::chrono::milliseconds(std::stoll(args["--janitor-ms"]));
  options.logger = [node](octop::LogLevel level, std::string_view message) {
    std::fprintf(stderr, "[node %s] %s: %.*s\n", node.c_str(),
                 std::string(octop::LogLevelName(level)).c_str(), static_cast<int>(message.size()),
                 message.data());
  };
  octop::Scheduler scheduler(options);

  std::atomic<int> seq{0};
  octop::TaskDefinition task;
  task.id = "shared-task";
  auto cadence = octop::Duration::ParseIso(args["--cadence"]);
  auto timeout = octop::Duration::ParseIso(args["--timeout"]);
  if (!cadence.ok() || !timeout.ok()) {
    std::fprintf(stderr, "bad duration\n");
    return 2;
  }
  task.frequency = *cadence;
  task.timeout = *timeout;
  task.fn = [&](std::stop_token stop) {
    const int n = ++seq;
    Append(fd, "S " + node + " " + std::to_string(n) + " " + std::to_string(UnixNs()) + "\n");
    // The work: holds the run for --run-ms (or until stopped).
    octop::Clock::Real().WaitFor(run_for, stop);
    Append(fd, "E " + node + " " + std::to_string(n) + " " + std::to_string(UnixNs()) + "\n");
  };
  octop::Status scheduled = scheduler.ForPlugin(args["--plugin"]).ScheduleTask(task);
  if (!scheduled.ok()) {
    std::fprintf(stderr, "schedule failed: %s\n", scheduled.ToString().c_str());
    return 1;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoll(args["--seconds"]));
  while (!g_stop && std::chrono::steady_clock::now() < end) {
    octop::Clock::Real().WaitFor(std::chrono::milliseconds(50), std::stop_token());
  }
  scheduler.Shutdown();
  close(fd);
  return 0;
}
