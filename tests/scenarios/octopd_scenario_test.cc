// Scenario tests: the real octopd binary on an ephemeral port with an SQLite directory of its own, driven
// over HTTP by a real client and by the real octop CLI. Waits are on conditions with deadlines, never sleeps.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.h"

namespace {

using octop::scenario::CheckWithPromtool;
using octop::scenario::Child;
using octop::scenario::ProcessRunning;
using octop::scenario::PromtoolVerdict;

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

bool WaitForFile(const fs::path& path, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    // Polling the file system is the condition here; the interval only bounds how soon we notice.
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

class OctopdScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("octopd-scenario-" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    daemon_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Writes the config and starts octopd on an ephemeral port; returns the port.
  int Start(const std::string& extra_http = "", const std::string& extra_tasks = "") {
    const std::string marker = (dir_ / "marker").string();
    std::ofstream(dir_ / "octop.yaml")
        << "database: sqlite:" << (dir_ / "data").string() << "\n"
        << "http:\n  listen: 127.0.0.1:0\n"
        << extra_http
        << "scheduler:\n  workCheckFrequency: 200ms\n"
           "plugins:\n"
           "  demo:\n"
           "    tasks:\n"
           "      - id: manual-marker\n"
           "        schedule: { frequency: { trigger: manual }, timeout: 30s }\n"
           "        command: [sh, -c, 'echo ran >> "
        << marker
        << "']\n"
           "      - id: slow\n"
           "        schedule: { frequency: { trigger: manual }, timeout: 30s }\n"
           "        command: [sh, -c, 'touch "
        << marker << ".slow; trap \"touch " << marker
        << ".term; exit 0\" TERM; while true; do sleep 0.05; done']\n"
           "      - id: fails\n"
           "        schedule: { frequency: { trigger: manual }, timeout: 30s }\n"
           "        command: [sh, -c, 'echo broken pipe >&2; exit 7']\n"
           "      - id: a/b\n"
           "        schedule: { frequency: { trigger: manual }, timeout: 30s }\n"
           "        command: [sh, -c, 'touch "
        << marker
        << ".ab']\n"
           "      - id: every-hour\n"
           "        schedule: { frequency: { hours: 1 }, timeout: 1m, initialDelay: 1h,"
           " scope: local }\n"
           "        command: ['true']\n"
        << extra_tasks;
    daemon_ = std::make_unique<Child>(
        std::vector<std::string>{OCTOPD_PATH, "--config", (dir_ / "octop.yaml").string()});
    auto port = daemon_->WaitForOutput("ready on port ([0-9]+)");
    EXPECT_TRUE(port.has_value()) << daemon_->output();
    port_ = port ? std::stoi(*port) : 0;
    return port_;
  }

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c;
  }

  std::string TasksPath() const { return "/api/demo/.backstage/scheduler/v1/tasks"; }

  Json TaskNamed(const std::string& id) {
    auto r = Client().Get(TasksPath());
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return {};
    const Json body = Json::parse(r->body);
    for (const Json& t : body["tasks"]) {
      if (t["taskId"] == id) return t;
    }
    return {};
  }

  // Waits until the task's state satisfies `pred`.
  bool WaitForTask(const std::string& id, const std::function<bool(const Json&)>& pred,
                   std::chrono::milliseconds timeout = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      Json t = TaskNamed(id);
      if (!t.is_null() && pred(t)) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  fs::path dir_;
  std::unique_ptr<Child> daemon_;
  int port_ = 0;
};

TEST_F(OctopdScenario, HealthReadinessAndTaskListingShapes) {
  ASSERT_GT(Start(), 0);
  auto health = Client().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = Client().Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  auto r = Client().Get(TasksPath());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  Json tasks = Json::parse(r->body)["tasks"];
  ASSERT_EQ(tasks.size(), 5u);
  EXPECT_EQ(tasks[0]["taskId"], "manual-marker");  // registration order
  EXPECT_EQ(tasks[0]["pluginId"], "demo");
  EXPECT_EQ(tasks[0]["scope"], "global");
  EXPECT_EQ(tasks[0]["settings"],
            Json::parse(R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT30S"})"));
  EXPECT_EQ(tasks[0]["taskState"]["status"], "idle");
  EXPECT_FALSE(tasks[0]["taskState"].contains("startsAt"));  // manual: no next run
  const Json& local = tasks[4];
  EXPECT_EQ(local["scope"], "local");
  EXPECT_EQ(local["settings"]["cadence"], "PT1H");
  EXPECT_EQ(local["settings"]["initialDelayDuration"], "PT1H");
  EXPECT_EQ(local["workerState"]["status"], "initial-wait");
  EXPECT_TRUE(local["taskState"].contains("startsAt"));
  // A local task's times are UTC with a Z, as Backstage writes them (luxon's DateTime.utc()).
  EXPECT_TRUE(std::regex_match(local["taskState"]["startsAt"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << local["taskState"]["startsAt"];
}

TEST_F(OctopdScenario, TriggerRunsTheCommandAndConflictsWhileRunning) {
  ASSERT_GT(Start(), 0);
  auto r = Client().Post(TasksPath() + "/manual-marker/trigger");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  ASSERT_TRUE(WaitForFile(dir_ / "marker")) << daemon_->output();
  ASSERT_TRUE(WaitForTask("manual-marker", [](const Json& t) {
    return t["taskState"]["status"] == "idle" && t["taskState"].contains("lastRunEndedAt");
  }));
  EXPECT_FALSE(TaskNamed("manual-marker")["taskState"].contains("lastRunError"));

  ASSERT_EQ(Client().Post(TasksPath() + "/slow/trigger")->status, 200);
  ASSERT_TRUE(WaitForFile(dir_ / "marker.slow")) << daemon_->output();
  ASSERT_TRUE(WaitForTask("slow", [](const Json& t) { return t["taskState"]["status"] == "running"; }));
  auto conflict = Client().Post(TasksPath() + "/slow/trigger");
  ASSERT_TRUE(conflict);
  EXPECT_EQ(conflict->status, 409);
  Json body = Json::parse(conflict->body);
  EXPECT_EQ(body["error"]["name"], "ConflictError");
  EXPECT_EQ(body["error"]["message"], "Task slow is currently running");
  EXPECT_EQ(body["request"]["method"], "POST");
  EXPECT_EQ(body["response"]["statusCode"], 409);

  // Cancel stops the command (SIGTERM reaches its trap) and records the cancellation.
  auto cancel = Client().Post(TasksPath() + "/slow/cancel");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200);
  ASSERT_TRUE(WaitForFile(dir_ / "marker.term")) << daemon_->output();
  ASSERT_TRUE(WaitForTask("slow", [](const Json& t) { return t["taskState"]["status"] == "idle"; }));
  EXPECT_NE(TaskNamed("slow")["taskState"].value("lastRunError", "").find("Task was cancelled"),
            std::string::npos);
}

TEST_F(OctopdScenario, FailingCommandShowsItsErrorAndMetricsCountIt) {
  ASSERT_GT(Start(), 0);
  ASSERT_EQ(Client().Post(TasksPath() + "/fails/trigger")->status, 200);
  ASSERT_TRUE(WaitForTask("fails", [](const Json& t) { return t["taskState"].contains("lastRunError"); }))
      << daemon_->output();
  Json error = Json::parse(TaskNamed("fails")["taskState"]["lastRunError"].get<std::string>());
  EXPECT_EQ(error["message"], "command exited with status 7: broken pipe");
  auto metrics = Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("backend_tasks_task_runs_count"), std::string::npos);
  EXPECT_NE(metrics->body.find("result=\"failed\""), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("taskId=\"fails\""), std::string::npos);
  // Prometheus parses it (exit 1 would say it cannot). Its lint flags only Backstage's own names, kept as the
  // scheduler spec gives them (camelCase labels, a counter named ..._count: docs/scheduler.md "Metrics").
  const PromtoolVerdict verdict = CheckWithPromtool(metrics->body);
  EXPECT_TRUE(verdict.exit_code == 0 || verdict.exit_code == 3) << verdict.output << "\n" << metrics->body;
  for (const std::string& problem : verdict.problems) {
    EXPECT_TRUE(problem.starts_with("backend_tasks_task_runs_")) << problem;
  }
}

TEST_F(OctopdScenario, ErrorsAreJsonWithBackstageShape) {
  ASSERT_GT(Start(), 0);
  auto missing = Client().Post(TasksPath() + "/nope/trigger");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  Json body = Json::parse(missing->body);
  EXPECT_EQ(body["error"]["name"], "NotFoundError");
  EXPECT_EQ(body["error"]["message"], "Task nope does not exist");
  EXPECT_EQ(body["request"]["url"], "/api/demo/.backstage/scheduler/v1/tasks/nope/trigger");

  auto not_running = Client().Post(TasksPath() + "/manual-marker/cancel");
  ASSERT_TRUE(not_running);
  EXPECT_EQ(not_running->status, 409);
  EXPECT_EQ(Json::parse(not_running->body)["error"]["message"], "Task manual-marker is not running");

  auto bad_encoding = Client().Post(TasksPath() + "/%zz/trigger");
  ASSERT_TRUE(bad_encoding);
  EXPECT_EQ(bad_encoding->status, 400);
  EXPECT_EQ(Json::parse(bad_encoding->body)["error"]["name"], "InputError");

  auto no_plugin = Client().Get("/api/ghost/.backstage/scheduler/v1/tasks");
  ASSERT_TRUE(no_plugin);
  EXPECT_EQ(no_plugin->status, 404);
  EXPECT_EQ(Json::parse(no_plugin->body)["error"]["name"], "NotFoundError");

  auto unknown_route = Client().Get("/api/demo/nothing-here");
  ASSERT_TRUE(unknown_route);
  EXPECT_EQ(unknown_route->status, 404);
  EXPECT_TRUE(Json::parse(unknown_route->body, nullptr, false).is_object());

  auto huge =
      Client().Post(TasksPath() + "/manual-marker/trigger", std::string(2 << 20, 'x'), "application/json");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 413);
  // A body that is not JSON is refused on its header, before it is read (a browser's "simple request").
  auto plain = Client().Post(TasksPath() + "/manual-marker/trigger", "x", "text/plain");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 415);

  auto long_id = Client().Post(TasksPath() + "/" + std::string(10000, 'i') + "/trigger");
  ASSERT_TRUE(long_id);
  EXPECT_GE(long_id->status, 400);
  EXPECT_LT(long_id->status, 500);

  // Still serving after all that.
  EXPECT_EQ(Client().Get("/healthz")->status, 200);
}

TEST_F(OctopdScenario, EncodedSlashInIdReachesTheTask) {
  ASSERT_GT(Start(), 0);
  auto r = Client().Post(TasksPath() + "/a%2Fb/trigger");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(WaitForFile(dir_ / "marker.ab")) << daemon_->output();
}

TEST_F(OctopdScenario, BarePostWithoutBodyIsAccepted) {
  // `curl -X POST url` sends neither Content-Length nor a body; Backstage (Express) accepts that.
  ASSERT_GT(Start(), 0);
  Child curl({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
              "http://127.0.0.1:" + std::to_string(port_) + TasksPath() + "/manual-marker/trigger"});
  ASSERT_EQ(curl.Wait(30s), 0) << curl.output();
  EXPECT_EQ(curl.output(), "200");
  EXPECT_TRUE(WaitForFile(dir_ / "marker")) << daemon_->output();
}

TEST_F(OctopdScenario, WebhookTasksCallTheirUrlAndFailOnNon2xx) {
  httplib::Server hook;
  std::mutex mu;
  std::vector<Json> received;
  hook.Post("/ok", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    received.push_back(Json::parse(req.body, nullptr, false));
    received.back()["auth"] = req.get_header_value("X-Key");
    res.status = 204;
  });
  hook.Post("/down", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content("maintenance", "text/plain");
  });
  const int hook_port = hook.bind_to_any_port("127.0.0.1");
  ASSERT_GT(hook_port, 0);
  std::thread hook_thread([&] { hook.listen_after_bind(); });
  const std::string base = "http://127.0.0.1:" + std::to_string(hook_port);
  ASSERT_GT(Start("",
                  "      - id: hook-ok\n"
                  "        schedule: { frequency: { trigger: manual }, timeout: 10s }\n"
                  "        webhook: { url: '" +
                      base +
                      "/ok', headers: { X-Key: k1 } }\n"
                      "      - id: hook-down\n"
                      "        schedule: { frequency: { trigger: manual }, timeout: 10s }\n"
                      "        webhook: { url: '" +
                      base + "/down' }\n"),
            0);
  ASSERT_EQ(Client().Post(TasksPath() + "/hook-ok/trigger")->status, 200);
  ASSERT_EQ(Client().Post(TasksPath() + "/hook-down/trigger")->status, 200);
  EXPECT_TRUE(
      WaitForTask("hook-ok", [](const Json& t) { return t["taskState"].contains("lastRunEndedAt"); }));
  ASSERT_TRUE(
      WaitForTask("hook-down", [](const Json& t) { return t["taskState"].contains("lastRunError"); }));
  EXPECT_FALSE(TaskNamed("hook-ok")["taskState"].contains("lastRunError"));
  Json error = Json::parse(TaskNamed("hook-down")["taskState"]["lastRunError"].get<std::string>());
  EXPECT_EQ(error["message"], "webhook " + base + "/down answered 503: maintenance");
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(received.size(), 1u);
    EXPECT_EQ(received[0]["pluginId"], "demo");
    EXPECT_EQ(received[0]["taskId"], "hook-ok");
    EXPECT_EQ(received[0]["auth"], "k1");
  }
  hook.stop();
  hook_thread.join();
}

TEST_F(OctopdScenario, BearerTokenGuardsPostsOnly) {
  ASSERT_GT(Start("  token: scenario-token-0123456789\n"), 0);
  auto no_token = Client().Post(TasksPath() + "/manual-marker/trigger");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  EXPECT_EQ(Json::parse(no_token->body)["error"]["name"], "AuthenticationError");
  httplib::Headers wrong{{"Authorization", "Bearer scenario-token-0123456780"}};
  EXPECT_EQ(Client().Post(TasksPath() + "/manual-marker/trigger", wrong, "", "text/plain")->status, 401);
  EXPECT_FALSE(fs::exists(dir_ / "marker"));
  httplib::Headers right{{"Authorization", "Bearer scenario-token-0123456789"}};
  EXPECT_EQ(Client().Post(TasksPath() + "/manual-marker/trigger", right, "", "text/plain")->status, 200);
  EXPECT_TRUE(WaitForFile(dir_ / "marker"));
  EXPECT_EQ(Client().Get(TasksPath())->status, 200);
}

// kill -9 of octopd in the middle of a run: the command, and the process it forked, end with it (octop-exec
// holds a parent-death signal), so no other node's next run can overlap them (docs/reliability.md, "No run
// outlives its node").
TEST_F(OctopdScenario, KillNineOfOctopdEndsEveryProcessOfTheRun) {
  const std::string pids = (dir_ / "pids").string();
  ASSERT_GT(Start("",
                  "      - id: forks\n"
                  "        schedule: { frequency: { trigger: manual }, timeout: 5m }\n"
                  "        command: [sh, -c, 'sleep 300 & echo $! $$ > " +
                      pids + ".tmp; mv " + pids + ".tmp " + pids + "; sleep 300']\n"),
            0);
  ASSERT_EQ(Client().Post(TasksPath() + "/forks/trigger")->status, 200);
  ASSERT_TRUE(WaitForFile(pids)) << daemon_->output();
  pid_t background = 0, shell = 0;
  std::ifstream(pids) >> background >> shell;
  ASSERT_GT(background, 0);
  ASSERT_GT(shell, 0);
  ASSERT_TRUE(ProcessRunning(background) && ProcessRunning(shell));
  const auto killed_at = std::chrono::steady_clock::now();
  daemon_->Signal(SIGKILL);
  ASSERT_TRUE(daemon_->Wait(30s).has_value());
  const auto deadline = killed_at + 5s;
  while ((ProcessRunning(background) || ProcessRunning(shell)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(ProcessRunning(background)) << "the command's background child outlived octopd";
  EXPECT_FALSE(ProcessRunning(shell)) << "the command outlived octopd";
  std::printf("run processes gone %lld ms after kill -9 of octopd\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - killed_at)
                                         .count()));
  for (pid_t pid : {background, shell}) {
    if (ProcessRunning(pid)) ::kill(pid, SIGKILL);
  }
}

TEST_F(OctopdScenario, SigtermDrainsARunningCommandAndExitsZero) {
  ASSERT_GT(Start(), 0);
  ASSERT_EQ(Client().Post(TasksPath() + "/slow/trigger")->status, 200);
  ASSERT_TRUE(WaitForFile(dir_ / "marker.slow"));
  daemon_->Signal(SIGTERM);
  auto code = daemon_->Wait(30s);
  ASSERT_TRUE(code.has_value()) << daemon_->output();
  EXPECT_EQ(*code, 0) << daemon_->output();
  EXPECT_TRUE(fs::exists(dir_ / "marker.term"));
}

TEST_F(OctopdScenario, InvalidConfigExitsTwoNamingTheKey) {
  std::ofstream(dir_ / "bad.yaml") << "plugins:\n  demo:\n    tasks:\n      - id: x\n        schedule:\n"
                                      "          frequency: { cron: '61 * * * *' }\n          timeout: 10s\n"
                                      "        command: ['true']\n";
  Child bad({OCTOPD_PATH, "--config", (dir_ / "bad.yaml").string()});
  auto code = bad.Wait(30s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2) << bad.output();
  EXPECT_NE(bad.output().find("61 * * * *"), std::string::npos) << bad.output();
  // --check refuses what a start refuses, and a directory is not a config file.
  Child check({OCTOPD_PATH, "--check", "--config", (dir_ / "bad.yaml").string()});
  EXPECT_EQ(check.Wait(30s), 2) << check.output();
  EXPECT_NE(check.output().find("61 * * * *"), std::string::npos) << check.output();
  Child directory({OCTOPD_PATH, "--check", "--config", dir_.string()});
  EXPECT_EQ(directory.Wait(30s), 2) << directory.output();
  EXPECT_NE(directory.output().find("is a directory"), std::string::npos) << directory.output();

  std::ofstream(dir_ / "typo.yaml") << "plugins:\n  demo:\n    taks: []\n";
  Child typo({OCTOPD_PATH, "--config", (dir_ / "typo.yaml").string()});
  ASSERT_EQ(typo.Wait(30s), 2);
  EXPECT_NE(typo.output().find("unknown key 'taks'; did you mean 'tasks'?"), std::string::npos)
      << typo.output();
}

// The database password never reaches a log line or an error (docs/reliability.md, "Threat model").
TEST_F(OctopdScenario, TheDatabasePasswordIsNeverLogged) {
  // A server that cannot be reached: the start-up error names the database, redacted.
  std::ofstream(dir_ / "down.yaml")
      << "database: postgresql://octop:hunter2-secret@127.0.0.1:1/nodb?connect_timeout=2\n"
         "http:\n  listen: 127.0.0.1:0\n";
  Child down({OCTOPD_PATH, "--config", (dir_ / "down.yaml").string()});
  auto code = down.Wait(60s);
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_EQ(down.output().find("hunter2-secret"), std::string::npos) << down.output();
  EXPECT_NE(down.output().find("octop:***@127.0.0.1:1"), std::string::npos) << down.output();

  // A server that answers (trust authentication ignores the password): the "listening" line is redacted too.
  const char* pg = std::getenv("OCTOP_TEST_PG_URL");
  if (pg == nullptr || std::string_view(pg).find("postgresql://octop@") != 0) {
    GTEST_SKIP() << "needs OCTOP_TEST_PG_URL of the form postgresql://octop@host:port/db";
  }
  std::string url = pg;
  url.replace(0, std::string_view("postgresql://octop@").size(), "postgresql://octop:hunter2-secret@");
  std::ofstream(dir_ / "up.yaml") << "database: " << url << "\nhttp:\n  listen: 127.0.0.1:0\n";
  daemon_ =
      std::make_unique<Child>(std::vector<std::string>{OCTOPD_PATH, "--config", (dir_ / "up.yaml").string()});
  ASSERT_TRUE(daemon_->WaitForOutput("ready on port ([0-9]+)").has_value()) << daemon_->output();
  EXPECT_EQ(daemon_->output().find("hunter2-secret"), std::string::npos) << daemon_->output();
  EXPECT_NE(daemon_->output().find("octop:***@"), std::string::npos) << daemon_->output();
}

TEST_F(OctopdScenario, CliListsTriggersAndReportsErrors) {
  ASSERT_GT(Start(), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  Child list({OCTOP_PATH, "--url", url, "tasks"});
  ASSERT_EQ(list.Wait(30s), 0) << list.output();
  EXPECT_NE(list.output().find("PLUGIN"), std::string::npos);
  EXPECT_NE(list.output().find("manual-marker"), std::string::npos) << list.output();

  Child json({OCTOP_PATH, "--url", url, "--json", "tasks", "--plugin", "demo"});
  ASSERT_EQ(json.Wait(30s), 0);
  EXPECT_EQ(Json::parse(json.output())["tasks"].size(), 5u);

  Child trigger({OCTOP_PATH, "--url", url, "trigger", "demo", "manual-marker"});
  ASSERT_EQ(trigger.Wait(30s), 0) << trigger.output();
  EXPECT_TRUE(WaitForFile(dir_ / "marker"));

  Child slash({OCTOP_PATH, "--url", url, "trigger", "demo", "a/b"});
  ASSERT_EQ(slash.Wait(30s), 0) << slash.output();

  Child missing({OCTOP_PATH, "--url", url, "trigger", "demo", "nope"});
  ASSERT_EQ(missing.Wait(30s), 1);
  EXPECT_NE(missing.output().find("NotFoundError: Task nope does not exist"), std::string::npos)
      << missing.output();

  Child unreachable({OCTOP_PATH, "--url", "http://127.0.0.1:1", "tasks"});
  EXPECT_EQ(unreachable.Wait(30s), 3);

  Child usage({OCTOP_PATH, "frobnicate"});
  EXPECT_EQ(usage.Wait(30s), 2);
}

TEST(OctopCli, MigrateAndDoctorOnSqlite) {
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("octop-cli-" + std::to_string(rd()));
  const std::string db = "sqlite:" + dir.string();
  Child before({OCTOP_PATH, "--database", db, "doctor", "--plugin", "demo"});
  EXPECT_EQ(before.Wait(30s), 1) << before.output();
  EXPECT_NE(before.output().find("run: octop migrate"), std::string::npos) << before.output();
  // Both lines are checked: the job queue's namespace and the plugin's.
  EXPECT_NE(before.output().find("FAIL  schema octop: version 0 of 8"), std::string::npos) << before.output();
  EXPECT_NE(before.output().find("FAIL  schema demo: version 0 of 3"), std::string::npos) << before.output();
  Child migrate({OCTOP_PATH, "--database", db, "migrate", "--plugin", "demo"});
  ASSERT_EQ(migrate.Wait(30s), 0) << migrate.output();
  EXPECT_NE(migrate.output().find("migrated demo"), std::string::npos);
  Child after({OCTOP_PATH, "--database", db, "--json", "doctor", "--plugin", "demo"});
  ASSERT_EQ(after.Wait(30s), 0) << after.output();
  Json report = Json::parse(after.output());
  EXPECT_TRUE(report["healthy"].get<bool>());
  std::vector<std::string> schemas;
  for (const Json& check : report["checks"]) {
    if (check["check"].get<std::string>().starts_with("schema ")) schemas.push_back(check["check"]);
  }
  EXPECT_EQ(schemas, (std::vector<std::string>{"schema octop", "schema demo"})) << after.output();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
