// Scenario tests of the job queue: the real octopd binary (SQLite directory of its own, ephemeral port) with
// command job handlers from its YAML config, driven over HTTP and through the real octop CLI. Every wait is
// on a condition with a deadline.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
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

#include "../support/eventually.h"
#include "child_process.h"

namespace {

using octop::scenario::Child;
using octop::test_support::Eventually;

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

class OctopdJobsScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("octopd-jobs-" + std::to_string(rd()));
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    std::ofstream(dir_ / "octop.yaml")
        << "database: sqlite:" << d << "/data\n"
        << "http:\n  listen: 127.0.0.1:0\n"
        << "jobs:\n"
           "  rescueInterval: 200ms\n"
           "  handlers:\n"
           "    - kind: sleepy\n"
           "      queue: slow\n"
           "      timeout: 60s\n"
           "      command: [sh, -c, 'touch "
        << d
        << "/sleepy.$OCTOP_JOB_ID; exec sleep 60']\n"
           "    - kind: mark\n"
           "      concurrency: 2\n"
           "      timeout: 30s\n"
           "      command: [sh, -c, 'cat > "
        << d << "/marker.$OCTOP_JOB_ID.tmp && mv " << d << "/marker.$OCTOP_JOB_ID.tmp " << d
        << "/marker.$OCTOP_JOB_ID; echo attempt $OCTOP_JOB_ATTEMPT of $OCTOP_JOB_KIND']\n"
           "    - kind: broken\n"
           "      queue: fragile\n"
           "      command: [sh, -c, 'echo \"disk full on attempt $OCTOP_JOB_ATTEMPT\" >&2; exit 3']\n"
           "    - kind: later\n"
           "      command: [sh, -c, 'test \"$OCTOP_JOB_ATTEMPT\" = 1 && exit 75; touch "
        << d << "/later.done']\n";
    const std::optional<int> port =
        octop::scenario::StartOctopd(OCTOPD_PATH, (dir_ / "octop.yaml").string(), daemon_);
    ASSERT_TRUE(port.has_value()) << daemon_->output();
    port_ = *port;
  }
  void TearDown() override {
    daemon_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c;
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // POST /api/octop/v1/jobs; returns (status, body).
  std::pair<int, Json> Post(const std::string& path, const std::string& body = "") {
    auto r = Client().Post(path, body, "application/json");
    if (!r) return {0, Json()};
    return {r->status, Json::parse(r->body, nullptr, false)};
  }
  Json GetJson(const std::string& path) {
    auto r = Client().Get(path);
    if (!r || r->status != 200) return Json();
    return Json::parse(r->body, nullptr, false);
  }
  bool WaitForStatus(const std::string& id, const std::string& status,
                     std::chrono::milliseconds timeout = 30s) {
    return Eventually([&] { return GetJson("/api/octop/v1/jobs/" + id).value("status", "") == status; },
                      timeout);
  }

  // Runs the octop CLI against this daemon; returns (exit code, output).
  std::pair<int, std::string> Cli(std::vector<std::string> args, const std::string& input = "") {
    std::vector<std::string> argv{OCTOP_PATH, "--url", Url()};
    argv.insert(argv.end(), args.begin(), args.end());
    Child cli(argv, input);
    auto code = cli.Wait(30s);
    return {code.value_or(-1), cli.output()};
  }

  fs::path dir_;
  std::unique_ptr<Child> daemon_;
  int port_ = 0;
};

TEST_F(OctopdJobsScenario, APostedJobRunsItsCommandWithThePayloadOnStdin) {
  auto [status, body] =
      Post("/api/octop/v1/jobs", R"({"kind":"mark","payload":{"hello":"world","n":[1,2]}})");
  ASSERT_EQ(status, 201) << body.dump();
  EXPECT_EQ(body["existing"], false);
  const std::string id = body["id"];
  EXPECT_TRUE(  // a version 7 UUID (docs/store.md §8.1, "Job ids")
      std::regex_match(id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << id;

  const fs::path marker = dir_ / ("marker." + id);
  ASSERT_TRUE(Eventually([&] { return fs::exists(marker); })) << daemon_->output();
  std::ifstream in(marker);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(Json::parse(content.str()), Json::parse(R"({"hello":"world","n":[1,2]})"));
  ASSERT_TRUE(WaitForStatus(id, "success")) << daemon_->output();
  Json job = GetJson("/api/octop/v1/jobs/" + id);
  EXPECT_EQ(job["kind"], "mark");
  EXPECT_EQ(job["queue"], "default");
  EXPECT_EQ(job["attempt"], 1);
  EXPECT_EQ(job["maxRetries"], 3);
  EXPECT_TRUE(job["lastError"].is_null());
  EXPECT_TRUE(std::regex_match(job["completedAt"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << job["completedAt"];
  EXPECT_TRUE(daemon_->WaitForOutput("attempt 1 of mark", 10s).has_value()) << daemon_->output();

  auto metrics = Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("octop_jobs_completed_total"), std::string::npos);
  EXPECT_NE(metrics->body.find("result=\"success\""), std::string::npos) << metrics->body;
  // Prometheus reads it, and its lint finds nothing in octop's own metrics (docs/api.md "Metrics"). Only the
  // scheduler's Backstage names may draw lint (docs/scheduler.md "Metrics"), and this daemon runs no task.
  const octop::scenario::PromtoolVerdict verdict = octop::scenario::CheckWithPromtool(metrics->body);
  EXPECT_EQ(verdict.exit_code, 0) << verdict.output << "\n" << metrics->body;
  for (const char* family : {"octop_jobs_enqueued_total", "octop_jobs_duration_seconds_bucket",
                             "octop_jobs_start_latency_seconds_bucket", "octop_jobs_running",
                             "octop_jobs_claim_duration_seconds_bucket", "octop_jobs_claimed_total"}) {
    EXPECT_NE(metrics->body.find(family), std::string::npos) << family << " is not exported";
  }
}

TEST_F(OctopdJobsScenario, AFailingHandlerEndsFrozenAfterItsRetriesWithItsError) {
  auto [status, body] = Post("/api/octop/v1/jobs", R"({"kind":"broken","queue":"fragile","maxRetries":2})");
  ASSERT_EQ(status, 201) << body.dump();
  const std::string id = body["id"];
  // Backoff 1 s then 2 s (+-20 % jitter): frozen within seconds.
  ASSERT_TRUE(WaitForStatus(id, "frozen", 60s)) << daemon_->output();
  Json job = GetJson("/api/octop/v1/jobs/" + id);
  EXPECT_EQ(job["attempt"], 3);
  EXPECT_EQ(job["lastError"], "command exited with status 3: disk full on attempt 3");

  Json summary = GetJson("/api/octop/v1/jobs/summary");
  bool counted = false;
  for (const Json& c : summary["counts"]) {
    counted = counted || (c["queue"] == "fragile" && c["status"] == "frozen" && c["count"] == 1);
  }
  EXPECT_TRUE(counted) << summary.dump();
  ASSERT_FALSE(summary["latestFailed"].empty());
  EXPECT_EQ(summary["latestFailed"][0]["id"], id);

  // A manual retry gives it exactly one more attempt.
  auto [retried, after] = Post("/api/octop/v1/jobs/" + id + "/retry");
  ASSERT_EQ(retried, 200) << after.dump();
  ASSERT_TRUE(Eventually([&] {
    Json j = GetJson("/api/octop/v1/jobs/" + id);
    return j.value("status", "") == "frozen" && j.value("attempt", 0) == 4;
  })) << daemon_->output();
  EXPECT_EQ(GetJson("/api/octop/v1/jobs/" + id)["lastError"],
            "command exited with status 3: disk full on attempt 4");
}

TEST_F(OctopdJobsScenario, ExitCode75IsARetry) {
  auto [status, body] = Post("/api/octop/v1/jobs", R"({"kind":"later"})");
  ASSERT_EQ(status, 201);
  const std::string id = body["id"];
  ASSERT_TRUE(WaitForStatus(id, "success", 60s)) << daemon_->output();
  EXPECT_EQ(GetJson("/api/octop/v1/jobs/" + id)["attempt"], 2);
  EXPECT_TRUE(fs::exists(dir_ / "later.done"));
}

TEST_F(OctopdJobsScenario, UniqueKeysPauseResumeAndCancel) {
  // No handler for "nobody": its jobs stay pending, so the unique key stays taken.
  auto [s1, first] = Post("/api/octop/v1/jobs", R"({"kind":"nobody","uniqueKey":"only-one"})");
  auto [s2, second] = Post("/api/octop/v1/jobs", R"({"kind":"nobody","uniqueKey":"only-one"})");
  ASSERT_EQ(s1, 201);
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(second["existing"], true);
  EXPECT_EQ(second["id"], first["id"]);

  auto [cancelled, job] = Post("/api/octop/v1/jobs/" + first["id"].get<std::string>() + "/cancel");
  ASSERT_EQ(cancelled, 200) << job.dump();
  EXPECT_EQ(job["status"], "frozen");
  EXPECT_EQ(job["lastError"], "Job was cancelled");
  auto [again, conflict] = Post("/api/octop/v1/jobs/" + first["id"].get<std::string>() + "/cancel");
  EXPECT_EQ(again, 409);
  EXPECT_EQ(conflict["error"]["name"], "ConflictError");
  EXPECT_EQ(conflict["response"]["statusCode"], 409);

  auto [paused, p] = Post("/api/octop/v1/queues/default/pause");
  ASSERT_EQ(paused, 200);
  EXPECT_EQ(p, Json::parse(R"({"queue":"default","paused":true})"));
  EXPECT_EQ(GetJson("/api/octop/v1/jobs/summary")["pausedQueues"], Json::parse(R"(["default"])"));
  auto [s3, waiting] = Post("/api/octop/v1/jobs", R"({"kind":"mark"})");
  ASSERT_EQ(s3, 201);
  const std::string id = waiting["id"];
  EXPECT_EQ(GetJson("/api/octop/v1/jobs/" + id)["status"], "pending");
  ASSERT_EQ(Post("/api/octop/v1/queues/default/resume").first, 200);
  ASSERT_TRUE(WaitForStatus(id, "success")) << daemon_->output();
}

// Two octopd processes on one SQLite database: the second has no handlers (an API node). A cancel through it
// of a job the first runs is a request the first reads at its next rescue pass (no notification crosses
// processes on SQLite); the first stops the command and the attempt ends frozen, not retried.
TEST_F(OctopdJobsScenario, ACancelThroughAnotherNodeStopsTheCommandWhereItRuns) {
  auto [posted, job] = Post("/api/octop/v1/jobs", R"({"kind":"sleepy","queue":"slow","maxRetries":3})");
  ASSERT_EQ(posted, 201) << job.dump();
  const std::string id = job["id"];
  ASSERT_TRUE(Eventually([&] { return fs::exists(dir_ / ("sleepy." + id)); }, 30s)) << daemon_->output();

  const fs::path api_config = dir_ / "api.yaml";
  std::ofstream(api_config) << "database: sqlite:" << dir_.string() << "/data\n"
                            << "http:\n  listen: 127.0.0.1:0\n";
  Child api({OCTOPD_PATH, "--config", api_config.string()});
  auto api_port = api.WaitForOutput("ready on port ([0-9]+)");
  ASSERT_TRUE(api_port.has_value()) << api.output();
  // Through the real CLI: 200, so exit 0 -- asked to stop, not refused. The answer is the job as the API node
  // read it right after the request: still running, unless the other node was quicker (it may be, in
  // principle: it reads the requests every 200 ms), then already frozen.
  Child cli({OCTOP_PATH, "--url", "http://127.0.0.1:" + *api_port, "jobs", "cancel", id});
  ASSERT_EQ(cli.Wait(30s).value_or(-1), 0) << cli.output() << api.output();
  const bool requested =
      cli.output().find("stop requested for " + id + " (running; it ends frozen unless it finishes first)") !=
      std::string::npos;
  const bool already = cli.output().find("cancelled " + id + " (now frozen)") != std::string::npos;
  EXPECT_TRUE(requested || already) << cli.output();

  // The command would sleep a minute; the attempt ends when its process group is stopped.
  ASSERT_TRUE(WaitForStatus(id, "frozen", 30s)) << daemon_->output();
  const Json done = GetJson("/api/octop/v1/jobs/" + id);
  EXPECT_EQ(done["lastError"], "Job was cancelled") << done.dump();
  EXPECT_EQ(done["attempt"], 1);
}

TEST_F(OctopdJobsScenario, BadRequestsAreInputErrorsAndWriteNothing) {
  struct Case {
    std::string body;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{not json", "Request body is not valid JSON"},
           {R"({"payload":{}})", "'kind' is required"},
           {R"({"kind":"mark","maxRetries":-2})", "'maxRetries' must be between 0 and 1000, got -2"},
           {R"({"kind":"mark","scheduledAt":"next tuesday"})", "'scheduledAt' must be an ISO 8601 instant"},
           {R"({"kind":"mark","scheduledAt":"2999-01-01T00:00:00Z"})", "between the years 1970 and 2200"},
           {R"({"kind":"mark","priority":1.5})", "'priority' must be an integer"},
           {R"({"kind":"mark","extra":1})", "Unknown field 'extra'"},
       }) {
    auto [status, body] = Post("/api/octop/v1/jobs", c.body);
    EXPECT_EQ(status, 400) << c.body;
    EXPECT_EQ(body["error"]["name"], "InputError") << c.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << c.body << " -> " << body.dump();
  }
  EXPECT_TRUE(GetJson("/api/octop/v1/jobs")["jobs"].empty());

  auto bad_status = Client().Get("/api/octop/v1/jobs?status=done");
  ASSERT_TRUE(bad_status);
  EXPECT_EQ(bad_status->status, 400);
  auto bad_limit = Client().Get("/api/octop/v1/jobs?limit=0");
  ASSERT_TRUE(bad_limit);
  EXPECT_EQ(bad_limit->status, 400);
  auto missing = Client().Get("/api/octop/v1/jobs/00000000-0000-4000-8000-000000000000");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["message"],
            "Job 00000000-0000-4000-8000-000000000000 does not exist");
  EXPECT_EQ(Post("/api/octop/v1/jobs/nope/retry").first, 404);

  // A job scheduled for later is accepted and waits.
  auto [status, later] =
      Post("/api/octop/v1/jobs", R"({"kind":"mark","scheduledAt":"2200-01-01T00:00:00+02:00"})");
  ASSERT_EQ(status, 201);
  Json job = GetJson("/api/octop/v1/jobs/" + later["id"].get<std::string>());
  EXPECT_EQ(job["scheduledAt"], "2199-12-31T22:00:00.000Z");
  EXPECT_EQ(job["status"], "pending");
}

TEST_F(OctopdJobsScenario, TheCliEnqueuesListsSummarizesRetriesAndCancels) {
  auto [code, out] = Cli({"jobs", "enqueue", "mark", "--payload", R"({"via":"cli"})"});
  ASSERT_EQ(code, 0) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("enqueued ([0-9a-f-]{36})"))) << out;
  const std::string id = m[1];
  ASSERT_TRUE(WaitForStatus(id, "success")) << daemon_->output();

  auto [from_stdin, stdin_out] =
      Cli({"--json", "jobs", "enqueue", "mark", "--payload", "-", "--priority", "5"}, R"({"via":"stdin"})");
  ASSERT_EQ(from_stdin, 0) << stdin_out;
  const Json enqueued = Json::parse(stdin_out, nullptr, false);
  ASSERT_TRUE(enqueued.is_object()) << stdin_out;
  ASSERT_TRUE(WaitForStatus(enqueued["id"], "success"));

  auto [listed, list_out] = Cli({"--json", "jobs", "list", "--kind", "mark", "--status", "success"});
  ASSERT_EQ(listed, 0) << list_out;
  const Json list = Json::parse(list_out, nullptr, false);
  ASSERT_TRUE(list.is_object()) << list_out;
  ASSERT_EQ(list["jobs"].size(), 2u);
  EXPECT_EQ(list["jobs"][0]["payload"], Json::parse(R"({"via":"stdin"})"));  // newest first
  EXPECT_EQ(list["jobs"][0]["priority"], 5);
  EXPECT_EQ(list["jobs"][1]["id"], id);

  auto [table, table_out] = Cli({"jobs", "list"});
  ASSERT_EQ(table, 0);
  EXPECT_NE(table_out.find("STATUS"), std::string::npos);
  EXPECT_NE(table_out.find(id), std::string::npos);

  auto [summary, summary_out] = Cli({"jobs", "summary"});
  ASSERT_EQ(summary, 0) << summary_out;
  EXPECT_TRUE(std::regex_search(summary_out, std::regex(R"(default\s+success\s+2)"))) << summary_out;

  auto [waiting_code, waiting_out] = Cli({"jobs", "enqueue", "nobody", "--at", "2200-01-01T00:00:00Z"});
  ASSERT_EQ(waiting_code, 0) << waiting_out;
  ASSERT_TRUE(std::regex_search(waiting_out, m, std::regex("enqueued ([0-9a-f-]{36})")));
  auto [cancel_code, cancel_out] = Cli({"jobs", "cancel", m[1]});
  EXPECT_EQ(cancel_code, 0) << cancel_out;
  EXPECT_NE(cancel_out.find("now frozen"), std::string::npos) << cancel_out;
  auto [retry_code, retry_out] = Cli({"jobs", "retry", id});  // success is final
  EXPECT_EQ(retry_code, 1) << retry_out;
  EXPECT_NE(retry_out.find("ConflictError"), std::string::npos) << retry_out;

  EXPECT_EQ(Cli({"jobs", "enqueue", "mark", "--payload", "{broken"}).first, 2);
  EXPECT_EQ(Cli({"jobs", "list", "--status", "weird"}).first, 1);
  EXPECT_EQ(Cli({"jobs"}).first, 2);
}

}  // namespace
