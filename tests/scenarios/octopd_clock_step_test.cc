// Wall-clock steps through the real octopd: libfaketime moves its wall clock (and SQLite's, which runs in the
// same process) by two hours while the monotonic clock stays true, as an NTP step or a VM resume does
// (docs/reliability.md, "Clock steps"). On SQLite, whose clock steps with the host's, and, when
// OCTOP_TEST_PG_URL is set, on PostgreSQL, whose clock does not move -- also through PgBouncer in transaction
// mode when OCTOP_TEST_PGBOUNCER_URL is set, with the config keys that mode needs (docs/configuration.md,
// "Behind PgBouncer"). Every wait is on a condition with a deadline.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

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

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

class OctopdClockStep : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "libfaketime's preload and ThreadSanitizer's interceptors do not mix; the debug (ASan) "
                    "build runs this test";
#endif
    if (!fs::exists(kFaketime))
      GTEST_SKIP() << "libfaketime is missing (scripts/install-deps.sh installs it)";
    std::random_device rd;
    const std::string tag = std::to_string(rd());
    dir_ = fs::temp_directory_path() / ("octopd-clock-" + tag);
    fs::create_directories(dir_);
    kind_ = "hold" + tag;
    std::string database = "sqlite:" + (dir_ / "data").string();
    if (GetParam() != "sqlite") {
      const char* url = std::getenv("OCTOP_TEST_PG_URL");
      if (url == nullptr) GTEST_SKIP() << "needs OCTOP_TEST_PG_URL";
      std::string pooling;
      if (GetParam() == "pgbouncer") {
        const char* bouncer = std::getenv("OCTOP_TEST_PGBOUNCER_URL");
        if (bouncer == nullptr) GTEST_SKIP() << "needs OCTOP_TEST_PGBOUNCER_URL";
        pooling = std::string(", preparedStatements: false, listenConnection: '") + url + "'";
        url = bouncer;
      }
      database = std::string("{connection: '") + url + "', pluginDivisionMode: schema, schemaPrefix: clk" +
                 tag + "_" + pooling + "}";
    }
    SetOffset("+0");
    const std::string d = dir_.string();
    std::ofstream(dir_ / "octop.yaml")
        << "database: " << database << "\n"
        << "http:\n  listen: 127.0.0.1:0\n"
        << "scheduler:\n  workCheckFrequency: 200ms\n"
        << "jobs:\n"
           "  rescueInterval: 200ms\n"
           "  handlers:\n"
           "    - kind: "
        << kind_
        << "\n"
           "      concurrency: 4\n"
           "      timeout: 60s\n"
           "      command: [sh, -c, 'echo \"$OCTOP_JOB_ID $OCTOP_JOB_ATTEMPT\" >> "
        << d << "/runs; while [ ! -e " << d
        << "/release ]; do sleep 0.05; done']\n"
           "plugins:\n"
           "  clock:\n"
           "    tasks:\n"
           "      - id: tick\n"
           "        schedule: { frequency: PT1S, timeout: 30s }\n"
           "        command: [sh, -c, 'echo tick >> "
        << d << "/ticks']\n";
    const char* asan = std::getenv("ASAN_OPTIONS");
    daemon_ = std::make_unique<Child>(
        std::vector<std::string>{OCTOPD_PATH, "--config", (dir_ / "octop.yaml").string()}, "",
        std::vector<std::string>{
            std::string("LD_PRELOAD=") + kFaketime, "FAKETIME_TIMESTAMP_FILE=" + (dir_ / "faketime").string(),
            "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1",
            // ASan wants to come first among the preloaded libraries; faketime's preload comes before it.
            std::string("ASAN_OPTIONS=") + (asan != nullptr ? std::string(asan) + ":" : "") +
                "verify_asan_link_order=0"});
    auto port = daemon_->WaitForOutput("ready on port ([0-9]+)");
    ASSERT_TRUE(port.has_value()) << daemon_->output();
    port_ = std::stoi(*port);
  }
  void TearDown() override {
    if (daemon_ != nullptr) {
      std::ofstream(dir_ / "release");
      daemon_->Signal(SIGTERM);
      daemon_->Wait(30s);
      daemon_.reset();
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // libfaketime re-reads this file on every clock read (FAKETIME_NO_CACHE): written atomically, it steps the
  // wall clock of octopd and of every process it starts.
  void SetOffset(const std::string& offset) {
    std::ofstream(dir_ / "faketime.tmp") << offset << "\n";
    fs::rename(dir_ / "faketime.tmp", dir_ / "faketime");
  }

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c;
  }
  Json GetJson(const std::string& path) {
    auto r = Client().Get(path);
    if (!r || r->status != 200) return Json();
    return Json::parse(r->body, nullptr, false);
  }
  Json GetJob(const std::string& id) { return GetJson("/api/octop/v1/jobs/" + id); }
  bool Logged(const std::string& text) {
    daemon_->Drain();
    return daemon_->output().find(text) != std::string::npos;
  }

  fs::path dir_;
  std::string kind_;
  std::unique_ptr<Child> daemon_;
  int port_ = 0;
};

TEST_P(OctopdClockStep, TwoHoursForwardReRunsNoJobAndTwoHoursBackStopsNoTask) {
  // Three jobs run (they wait for a release file) when the wall clock jumps two hours ahead: their leases
  // look expired. None may run a second time.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = Client().Post("/api/octop/v1/jobs", R"({"kind":")" + kind_ + R"(","payload":{}})",
                           "application/json");
    ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    ids.push_back(Json::parse(r->body)["id"].get<std::string>());
  }
  ASSERT_TRUE(Eventually([&] { return NonEmptyLines(dir_ / "runs").size() == 3; })) << daemon_->output();
  ASSERT_TRUE(Eventually([&] { return NonEmptyLines(dir_ / "ticks").size() >= 2; })) << daemon_->output();

  SetOffset("+7200");
  const auto stepped = std::chrono::steady_clock::now();
  // SQLite's clock is the host's and steps with it: octopd renews its leases. PostgreSQL's does not: the
  // leases stay true and there is nothing to renew.
  const bool database_steps = GetParam() == "sqlite";
  if (database_steps) {
    EXPECT_TRUE(Eventually([&] { return Logged("renewed the leases of 3 running jobs of this node"); }, 10s))
        << daemon_->output();
  }
  // Absence over the window in which a wrong rescue would come: past the rescuer's hold (2 s), many passes.
  EXPECT_FALSE(Eventually(
      [&] { return NonEmptyLines(dir_ / "runs").size() > 3; },
      std::chrono::duration_cast<std::chrono::milliseconds>(stepped + 4s - std::chrono::steady_clock::now())))
      << "a job ran twice:\n"
      << daemon_->output();
  std::ofstream(dir_ / "release");
  for (const std::string& id : ids) {
    ASSERT_TRUE(Eventually([&] {
      const Json job = GetJob(id);
      return job.value("status", "") == "success";
    })) << daemon_->output();
    EXPECT_EQ(GetJob(id).value("attempt", 0), 1);
  }
  for (const std::string& line : NonEmptyLines(dir_ / "runs")) EXPECT_TRUE(line.ends_with(" 1")) << line;

  // Back two hours: the task's stored next run now lies two hours ahead. It keeps its 1 s cadence.
  const std::size_t ticks = NonEmptyLines(dir_ / "ticks").size();
  SetOffset("+0");
  EXPECT_TRUE(Eventually([&] { return NonEmptyLines(dir_ / "ticks").size() >= ticks + 3; }, 15s))
      << "the task stopped after the clock went back:\n"
      << daemon_->output();
  EXPECT_EQ(Logged("The database's clock stepped -7200"), database_steps) << daemon_->output();
}

INSTANTIATE_TEST_SUITE_P(Backends, OctopdClockStep, ::testing::Values("sqlite", "postgres", "pgbouncer"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
