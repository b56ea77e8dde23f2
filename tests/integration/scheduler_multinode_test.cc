// Several nodes on one database, on the real clock: three Scheduler instances in one process, three processes
// (octop_scheduler_node) with one SIGKILLed mid-run, and the latencies the benchmarks care about (trigger ->
// start, cron lateness), printed so a run shows its figures.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scheduler_test_env.h"

namespace octop::runtime_testing {
namespace {

using namespace std::chrono_literals;

struct Interval {
  std::string node;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// Sorted by start; returns a description of the first overlap, or "".
std::string FindOverlap(std::vector<Interval> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  for (std::size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].start_ns < runs[i - 1].end_ns) {
      return "run of node " + runs[i].node + " starting at " + std::to_string(runs[i].start_ns) +
             " overlaps the run of node " + runs[i - 1].node + " ending at " +
             std::to_string(runs[i - 1].end_ns);
    }
  }
  return "";
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MultiNodeTest : public SchedulerTestBase {};

TEST_P(MultiNodeTest, ThreeNodesInOneProcessNeverOverlap) {
  std::mutex& mu = Make<std::mutex>();
  std::vector<Interval>& runs = Make<std::vector<Interval>>();
  CallCounter& calls = Make<CallCounter>();
  for (int n = 0; n < 3; ++n) {
    const std::string node = std::to_string(n);
    PluginScheduler& plugin = AddNode(&Clock::Real(), nullptr).ForPlugin(kPlugin);
    ASSERT_TRUE(plugin
                    .ScheduleTask(Global("shared", Ms(100),
                                         [&, node](std::stop_token stop) {
                                           Interval run{node, NowNs(), 0};
                                           Clock::Real().WaitFor(20ms, stop);  // the work
                                           run.end_ns = NowNs();
                                           {
                                             std::lock_guard lock(mu);
                                             runs.push_back(run);
                                           }
                                           calls.Hit();
                                         }))
                    .ok());
  }
  ASSERT_TRUE(calls.WaitForCalls(25, 30s));
  for (auto& node : nodes_) node->Shutdown();
  std::lock_guard lock(mu);
  std::map<std::string, int> per_node;
  for (const Interval& run : runs) per_node[run.node]++;
  std::printf("[%s] %zu runs:", backend().name.c_str(), runs.size());
  for (const auto& [node, count] : per_node) std::printf(" node %s=%d", node.c_str(), count);
  std::printf("\n");
  EXPECT_EQ(FindOverlap(runs), "");
}

TEST_P(MultiNodeTest, TriggerToStartIsMilliseconds) {
  PluginScheduler& plugin = AddNode(&Clock::Real(), nullptr).ForPlugin(kPlugin);
  auto& started_ns = Make<std::atomic<std::int64_t>>(0);
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("manual", ManualTrigger{},
                                       [&](std::stop_token) {
                                         started_ns = NowNs();
                                         calls.Hit();
                                       }))
                  .ok());
  std::vector<double> latencies_ms;
  for (int i = 1; i <= 40; ++i) {
    std::int64_t triggered_ns = 0;
    ASSERT_TRUE(Eventually([&] {
      triggered_ns = NowNs();
      return plugin.TriggerTask("manual").ok();  // Conflict until the previous run is released
    }));
    ASSERT_TRUE(calls.WaitForCalls(i));
    latencies_ms.push_back(static_cast<double>(started_ns.load() - triggered_ns) / 1e6);
  }
  const double p50 = Percentile(latencies_ms, 0.5);
  const double p99 = Percentile(latencies_ms, 0.99);
  std::printf("[%s] trigger->start over %zu triggers: p50 %.2f ms, p99 %.2f ms\n", backend().name.c_str(),
              latencies_ms.size(), p50, p99);
  EXPECT_LT(p50, 50.0);  // the poll interval is 5 s: anything near it means the wake-up path is broken
  EXPECT_LT(p99, 1000.0);
}

TEST_P(MultiNodeTest, CronFiresWithinMillisecondsOfItsTime) {
  PluginScheduler& plugin = AddNode(&Clock::Real(), nullptr).ForPlugin(kPlugin);
  std::mutex& mu = Make<std::mutex>();
  std::vector<double>& lateness_ms = Make<std::vector<double>>();
  CallCounter& calls = Make<CallCounter>();
  ASSERT_TRUE(plugin
                  .ScheduleTask(Global("cron", CronFrequency{"* * * * * *", "UTC"},
                                       [&](std::stop_token) {
                                         const std::int64_t now = NowNs();
                                         {
                                           std::lock_guard lock(mu);
                                           lateness_ms.push_back(static_cast<double>(now % 1'000'000'000) /
                                                                 1e6);
                                         }
                                         calls.Hit();
                                       }))
                  .ok());
  ASSERT_TRUE(calls.WaitForCalls(5, 15s));
  std::lock_guard lock(mu);
  lateness_ms.erase(lateness_ms.begin());  // the first run is due at registration (next occurrence minus 1 s)
  const double p50 = Percentile(lateness_ms, 0.5);
  const double max = Percentile(lateness_ms, 1.0);
  std::printf("[%s] cron lateness over %zu fires: p50 %.2f ms, max %.2f ms\n", backend().name.c_str(),
              lateness_ms.size(), p50, max);
  EXPECT_LT(max, 500.0);
}

// ---- Separate processes -----------------------------------------------------------------------------------

struct Line {
  char kind;
  std::string node;
  int seq;
  std::int64_t ns;
};

std::vector<Line> ReadLines(const std::string& path) {
  std::vector<Line> lines;
  std::ifstream in(path);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream fields(text);
    Line line{};
    if (fields >> line.kind >> line.node >> line.seq >> line.ns) lines.push_back(line);
  }
  return lines;
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* log = std::freopen(log_path.c_str(), "a", stderr);
    (void)log;
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

TEST_P(MultiNodeTest, ThreeProcessesNeverOverlapAndAKilledNodesRunIsReclaimed) {
  std::string url;
  std::random_device rd;
  const auto dir = std::filesystem::temp_directory_path() / ("octop-multiproc-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  std::string listen_db;  // set behind PgBouncer: the node's direct URL for LISTEN
  if (backend().is_postgres()) {
    ASSERT_FALSE(backend().url.empty());
    url = backend().url;
    listen_db = backend().pooling.listen_url;
  } else {
    url = "sqlite:" + dir.string();
  }
  const std::string plugin = Namespace("multiproc");
  const std::string out = (dir / "runs.log").string();
  const std::chrono::milliseconds timeout = 2s;
  std::vector<pid_t> pids;
  for (int n = 0; n < 3; ++n) {
    pids.push_back(Spawn({OCTOP_SCHEDULER_NODE_BINARY,
                          "--db",
                          url,
                          "--listen-db",
                          listen_db,
                          "--plugin",
                          plugin,
                          "--node",
                          std::to_string(n),
                          "--out",
                          out,
                          "--cadence",
                          "PT0.2S",
                          "--run-ms",
                          "150",
                          "--timeout",
                          "PT2S",
                          "--janitor-ms",
                          "300",
                          "--seconds",
                          "14"},
                         (dir / ("node" + std::to_string(n) + ".log")).string()));
  }
  // Once runs flow, SIGKILL the node that is in the middle of one.
  std::string victim;
  std::int64_t victim_start = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        std::vector<Line> lines = ReadLines(out);
        if (std::count_if(lines.begin(), lines.end(), [](const Line& l) { return l.kind == 'E'; }) < 8)
          return false;
        const Line& last = lines.back();
        if (last.kind != 'S') return false;
        const int n = std::stoi(last.node);
        kill(pids[static_cast<std::size_t>(n)], SIGKILL);
        victim = last.node;
        victim_start = last.ns;
        return true;
      },
      20s));
  const std::int64_t killed_at = NowNs();
  for (std::size_t n = 0; n < pids.size(); ++n) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[n], &status, 0), pids[n]);
    if (std::to_string(n) == victim) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else {  // a clean exit after a graceful Shutdown (a crash or a sanitizer report fails here)
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "node " << n << " status " << status;
    }
  }
  std::vector<Line> lines = ReadLines(out);
  // Completed runs, plus the killed run which held its claim until it expired.
  std::map<std::pair<std::string, int>, Interval> by_run;
  for (const Line& l : lines) {
    Interval& run = by_run[{l.node, l.seq}];
    run.node = l.node;
    (l.kind == 'S' ? run.start_ns : run.end_ns) = l.ns;
  }
  std::vector<Interval> runs;
  int open_runs = 0;
  for (auto& [key, run] : by_run) {
    if (run.end_ns == 0) {
      ++open_runs;
      EXPECT_EQ(key.first, victim);
      run.end_ns = run.start_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
    }
    runs.push_back(run);
  }
  EXPECT_EQ(open_runs, 1);
  EXPECT_EQ(FindOverlap(runs), "");
  // Another node took over after the claim expired and the janitor freed it.
  std::int64_t next_start = 0;
  for (const Interval& run : runs) {
    if (run.start_ns > victim_start && (next_start == 0 || run.start_ns < next_start))
      next_start = run.start_ns;
  }
  ASSERT_NE(next_start, 0) << "no run after the kill";
  const double takeover_s = static_cast<double>(next_start - victim_start) / 1e9;
  std::printf(
      "[%s] %zu runs by 3 processes; node %s killed mid-run %.3f s after its start; next run %.3f s after "
      "that start (timeout 2 s, janitor 0.3 s)\n",
      backend().name.c_str(), runs.size(), victim.c_str(),
      static_cast<double>(killed_at - victim_start) / 1e9, takeover_s);
  EXPECT_GE(takeover_s, 1.9);
  EXPECT_LE(takeover_s, 5.0);
  std::error_code ec;
  if (!HasFailure()) std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiNodeTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

}  // namespace
}  // namespace octop::runtime_testing
