// A PostgreSQL failover under two real octopd nodes: a durable primary with a synchronous streaming standby
// (scripts/pg-test-server.sh), both nodes on the libpq URL that names the two servers with
// target_session_attrs=read-write. The primary is stopped at once, as a kill -9 of the server would leave it,
// while a global task cycles and a job runs; the standby is promoted (docs/reliability.md, "Failover").
// Checked: /readyz says 503 while no server takes writes and 200 again after the promotion, without a
// restart; the global task never runs on two nodes at once and keeps running; the job running across the
// failover completes once, on its first attempt; jobs enqueued before and after run exactly once. Every wait
// is on a condition with a deadline.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../support/eventually.h"
#include "child_process.h"

namespace {

using octop::scenario::Child;
using octop::scenario::NonEmptyLines;
using octop::test_support::Eventually;

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

class OctopdFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("octopd-failover-" + std::to_string(rd()));
    fs::create_directories(dir_);
    // The servers run as the postgres user when this runs as root: it must reach their directories.
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    const std::string primary = Server("start", dir_ / "primary");
    ASSERT_FALSE(primary.empty());
    const std::string standby = Server("standby", dir_ / "standby", dir_ / "primary");
    ASSERT_FALSE(standby.empty());
    const std::string url = "postgresql://octop@127.0.0.1:" + Port(primary) + ",127.0.0.1:" + Port(standby) +
                            "/octop_test?target_session_attrs=read-write";
    for (const std::string node : {"a", "b"}) {
      const std::string d = dir_.string();
      const fs::path config = dir_ / ("octop-" + node + ".yaml");
      std::ofstream(config)
          << "database: {connection: '" << url << "', pluginDivisionMode: schema}\n"
          << "http:\n  listen: 127.0.0.1:0\n"
          << "nodeId: node-" << node << "\n"
          << "scheduler:\n  workCheckFrequency: 500ms\n  janitorInterval: 1s\n"
          << "jobs:\n"
             "  rescueInterval: 1s\n"
             "  handlers:\n"
             "    - kind: once\n"
             "      concurrency: 2\n"
             "      command: [sh, -c, 'echo $OCTOP_JOB_ID >> "
          << d
          << "/jobs']\n"
             "    - kind: long\n"
             "      timeout: 60s\n"
             "      command: [sh, -c, 'touch "
          << d << "/long.started; sleep 3; echo $OCTOP_JOB_ID >> " << d
          << "/jobs']\n"
             "plugins:\n"
             "  failover:\n"
             "    tasks:\n"
             "      - id: tick\n"
             "        schedule: { frequency: PT0.5S, timeout: PT10S }\n"
             // Each run writes its start and its end, also when it is stopped (the group gets SIGTERM).
             "        command: [sh, -c, 'trap ''echo E $(date +%s%N) "
          << node << " >> " << d << "/runs; exit 143'' TERM; echo S $(date +%s%N) " << node << " >> " << d
          << "/runs; sleep 0.3; echo E $(date +%s%N) " << node << " >> " << d << "/runs']\n";
      auto daemon =
          std::make_unique<Child>(std::vector<std::string>{OCTOPD_PATH, "--config", config.string()});
      auto port = daemon->WaitForOutput("ready on port ([0-9]+)");
      ASSERT_TRUE(port.has_value()) << daemon->output();
      ports_.push_back(std::stoi(*port));
      daemons_.push_back(std::move(daemon));
    }
  }

  void TearDown() override {
    for (auto& d : daemons_) {
      d->Signal(SIGTERM);
      d->Wait(30s);
    }
    daemons_.clear();
    Server("stop", dir_ / "primary");
    Server("stop", dir_ / "standby");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // scripts/pg-test-server.sh `command` on `dir` (durable servers: a commit is on disk and on the standby
  // before it is acknowledged); its last output line.
  std::string Server(const std::string& command, const fs::path& dir, const fs::path& primary = {}) {
    std::vector<std::string> argv{"/bin/bash", std::string(OCTOP_SOURCE_DIR) + "/scripts/pg-test-server.sh",
                                  command, dir.string()};
    if (!primary.empty()) argv.push_back(primary.string());
    Child script(argv, "", {"PG_TEST_SERVER_DURABLE=1"});
    const std::optional<int> code = script.Wait(120s);
    EXPECT_EQ(code, std::optional<int>(0)) << command << ": " << script.output();
    std::string out = script.output();
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  }
  static std::string Port(const std::string& url) {
    const std::size_t colon = url.rfind(':');
    return url.substr(colon + 1, url.find('/', colon) - colon - 1);
  }

  httplib::Client Client(int node) {
    httplib::Client c("127.0.0.1", ports_[static_cast<std::size_t>(node)]);
    c.set_read_timeout(20, 0);
    return c;
  }
  int Ready(int node) {
    auto r = Client(node).Get("/readyz");
    return r ? r->status : 0;
  }
  std::string Enqueue(const std::string& kind) {
    auto r = Client(0).Post("/api/octop/v1/jobs", R"({"kind":")" + kind + R"(","payload":{}})",
                            "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? Json::parse(r->body)["id"].get<std::string>() : "";
  }
  Json Job(const std::string& id) {
    auto r = Client(1).Get("/api/octop/v1/jobs/" + id);
    Json j = r && r->status == 200 ? Json::parse(r->body, nullptr, false) : Json();
    return j.is_object() ? j : Json::object();
  }
  bool AllSucceeded(const std::vector<std::string>& ids, std::chrono::milliseconds timeout) {
    return Eventually(
        [&] {
          return std::all_of(ids.begin(), ids.end(),
                             [&](const std::string& id) { return Job(id).value("status", "") == "success"; });
        },
        timeout, 100ms);
  }
  // Runs of the global task ended so far (E lines).
  std::size_t RunsEnded() {
    const std::vector<std::string> lines = NonEmptyLines(dir_ / "runs");
    return static_cast<std::size_t>(
        std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("E "); }));
  }
  std::string Output() {
    std::string out;
    for (auto& d : daemons_) out += d->output() + "\n----\n";
    return out;
  }

  fs::path dir_;
  std::vector<std::unique_ptr<Child>> daemons_;
  std::vector<int> ports_;
};

TEST_F(OctopdFailover, APromotedStandbyTakesOverWithoutARestartAndNoRunTwice) {
  ASSERT_EQ(Ready(0), 200);
  ASSERT_EQ(Ready(1), 200);
  ASSERT_TRUE(Eventually([&] { return RunsEnded() >= 3; }, 60s)) << Output();
  std::vector<std::string> before;
  for (int i = 0; i < 10; ++i) before.push_back(Enqueue("once"));
  ASSERT_TRUE(AllSucceeded(before, 60s)) << Output();

  // A job runs across the failover: the primary goes the moment its command has started. Its claim was
  // acknowledged before the command started, so with synchronous replication it is on the standby: the run
  // goes on, and no node claims the job again (docs/jobs.md "Durability of claims").
  const std::string long_job = Enqueue("long");
  ASSERT_TRUE(Eventually([&] { return fs::exists(dir_ / "long.started"); }, 60s, 1ms)) << Output();

  Server("crash", dir_ / "primary");
  EXPECT_TRUE(Eventually([&] { return Ready(0) == 503 && Ready(1) == 503; }, 30s, 100ms))
      << "no node said it cannot work while no server takes writes\n"
      << Output();
  const std::size_t at_promotion = RunsEnded();
  Server("promote", dir_ / "standby");
  EXPECT_TRUE(Eventually([&] { return Ready(0) == 200 && Ready(1) == 200; }, 60s, 100ms)) << Output();

  ASSERT_TRUE(AllSucceeded({long_job}, 60s)) << Output();
  EXPECT_EQ(Job(long_job).value("attempt", 0), 1);
  EXPECT_TRUE(Eventually([&] { return RunsEnded() >= at_promotion + 3; }, 60s))
      << "the global task stopped after the failover\n"
      << Output();
  std::vector<std::string> after;
  for (int i = 0; i < 10; ++i) after.push_back(Enqueue("once"));
  ASSERT_TRUE(AllSucceeded(after, 60s)) << Output();

  // Every job ran once.
  std::map<std::string, int> runs;
  for (const std::string& id : NonEmptyLines(dir_ / "jobs")) ++runs[id];
  before.insert(before.end(), after.begin(), after.end());
  before.push_back(long_job);
  for (const std::string& id : before) EXPECT_EQ(runs[id], 1) << id << ": " << Job(id).dump();
  EXPECT_EQ(runs.size(), before.size());
  if (HasFailure()) ADD_FAILURE() << Output();

  // The global task: one run at a time across the two nodes, the failover included. Each run is its S line
  // and the next E line of the same node.
  struct Run {
    std::int64_t start, end;
    std::string node;
  };
  std::vector<Run> intervals;
  std::map<std::string, std::int64_t> open;
  for (const std::string& line : NonEmptyLines(dir_ / "runs")) {
    std::istringstream in(line);
    std::string kind, node;
    std::int64_t at = 0;
    in >> kind >> at >> node;
    if (kind == "S") {
      EXPECT_FALSE(open.contains(node)) << "node " << node << " started a run inside its own";
      open[node] = at;
    } else if (open.contains(node)) {
      intervals.push_back({open[node], at, node});
      open.erase(node);
    }
  }
  std::sort(intervals.begin(), intervals.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  for (std::size_t i = 1; i < intervals.size(); ++i) {
    EXPECT_GE(intervals[i].start, intervals[i - 1].end)
        << "runs overlap: node " << intervals[i - 1].node << " and node " << intervals[i].node;
  }
  for (const auto& [node, start] : open) {
    // A run still going at the end must be the last one.
    EXPECT_TRUE(intervals.empty() || start >= intervals.back().end) << "node " << node;
  }
}

}  // namespace
