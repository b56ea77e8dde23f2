// Bad input at the REST edge (docs/reliability.md): a real ApiServer on an ephemeral loopback port, with a
// scheduler and a job queue on SQLite, fed huge bodies, bad JSON, invalid UTF-8, path traversal, NUL bytes
// and 10,000-char ids over a raw socket (so the bytes arrive exactly as written, unencoded). Every answer
// must be a JSON error in Backstage's shape with a 4xx status, no file outside the web root may be served,
// and the database rows must be exactly as before. Also: bearer-token checks and the warning for a
// non-loopback bind without one.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <octop/json_depth.h>
#include <octop/queue.h>
#include <octop/scheduler.h>

#include "../support/eventually.h"
#include "http/api_server.h"
#include "http/job_routes.h"
#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::http {
namespace {

using octop::test_support::Eventually;
using Json = nlohmann::json;

// Re-checks `condition` until it holds or `timeout` (real time) passes.
struct RawResponse {
  int status = 0;
  std::string headers;
  std::string body;
};

// A TCP connection to the server on loopback with 10 s send and receive timeouts; -1 on failure.
int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

RawResponse ReadAnswer(int fd, std::string& raw);

// Sends `request` byte for byte and reads the whole answer (the request asks the server to close).
RawResponse SendRaw(int port, const std::string& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return {};
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer 413 and close before reading everything
    sent += static_cast<std::size_t>(n);
  }
  // No half-close: httplib takes a peer that shut its write side for gone and drops the answer.
  std::string raw;
  RawResponse out = ReadAnswer(fd, raw);
  ::close(fd);
  return out;
}

// Reads one answer from `fd`, starting with what `raw` already holds; bytes of a following answer stay in
// `raw`. Reads until the headers and Content-Length bytes of body are in (or the server closes): a server
// that refused the request line may keep the connection open, so EOF alone would wait for the timeout.
RawResponse ReadAnswer(int fd, std::string& raw) {
  RawResponse out;
  char buf[65536];
  std::size_t head_end = std::string::npos;
  std::size_t want = std::string::npos;
  bool first = true;
  while (want == std::string::npos || raw.size() < want) {
    if (!first || raw.empty()) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      raw.append(buf, static_cast<std::size_t>(n));
    }
    first = false;
    if (head_end == std::string::npos && (head_end = raw.find("\r\n\r\n")) != std::string::npos) {
      std::string head = raw.substr(0, head_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const auto cl = head.find("content-length:");
      want = head_end + 4 + (cl != std::string::npos ? std::stoul(head.substr(cl + 15)) : 0);
    }
  }
  if (raw.size() < 12 || head_end == std::string::npos) {
    std::fprintf(stderr, "raw answer (%zu bytes, errno %d): %s\n", raw.size(), errno,
                 raw.substr(0, 200).c_str());
    return out;
  }
  const std::size_t end = std::min(raw.size(), want);
  out.status = std::stoi(raw.substr(9, 3));
  out.headers = raw.substr(0, head_end);
  out.body = raw.substr(head_end + 4, end - head_end - 4);
  raw.erase(0, end);
  return out;
}

std::string Request(const std::string& method, const std::string& target, const std::string& body = "",
                    const std::string& extra_headers = "") {
  std::string r =
      method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
  if (method == "POST" || !body.empty()) {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    root_ = std::filesystem::temp_directory_path() / ("octop-bad-input-" + std::to_string(rd()));
    std::filesystem::create_directories(root_ / "db");
    std::filesystem::create_directories(root_ / "web");
    std::ofstream(root_ / "web" / "index.html") << "<html>dashboard</html>";
    std::ofstream(root_ / "secret.txt") << "TOPSECRET";
    const std::string url = "sqlite:" + (root_ / "db").string();

    SchedulerOptions options;
    options.database_url = url;
    options.logger = [](LogLevel, std::string_view) {};
    scheduler_ = std::make_unique<Scheduler>(options);
    TaskDefinition task;
    task.id = "t";
    task.frequency = ManualTrigger{};
    task.timeout = Duration::FromMilliseconds(60000);
    task.fn = [](std::stop_token) {};
    ASSERT_TRUE(scheduler_->ForPlugin("demo").ScheduleTask(task).ok());

    JobQueueOptions job_options;
    job_options.database_url = url;
    job_options.logger = [](LogLevel, std::string_view) {};
    auto queue = JobQueue::Open(job_options);
    ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    queue_ = std::move(queue).value();  // never started: enqueued jobs stay pending
    JobSpec spec;
    spec.kind = "k";
    auto job = queue_->Enqueue(spec);
    ASSERT_TRUE(job.ok());
    job_id_ = job->id;

    auto tasks = store::OpenTaskStore(url, {.ns = "demo"});
    ASSERT_TRUE(tasks.ok());
    tasks_ = std::move(tasks).value();
    before_ = Snapshot();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    queue_.reset();
    scheduler_.reset();
    tasks_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  void StartServer(ApiServerOptions options) {
    options.port = 0;
    if (options.web_root.empty()) options.web_root = (root_ / "web").string();
    server_ = std::make_unique<ApiServer>(*scheduler_, std::move(options));
    AddJobRoutes(*server_, *queue_);
    ASSERT_TRUE(server_->Start().ok());
  }

  // Every row of the task table and the job table, as text.
  std::string Snapshot() {
    std::string out;
    auto rows = tasks_->ListTasks({});
    EXPECT_TRUE(rows.ok());
    if (rows.ok()) {
      for (const auto& r : *rows) {
        out += r.id + "|" + r.settings_json + "|" + (r.next_run_start_at ? "n" : "-") +
               (r.current_run_ticket ? *r.current_run_ticket : "-") + (r.last_run_ended_at ? "e" : "-") +
               "\n";
      }
    }
    auto jobs = queue_->ListJobs({.limit = 1000});
    EXPECT_TRUE(jobs.ok());
    if (jobs.ok()) {
      for (const auto& j : *jobs) {
        out += j.id + "|" + j.kind + "|" + std::string(JobStatusName(j.status)) + "|" +
               std::to_string(j.attempt) + "\n";
      }
    }
    return out;
  }

  // The answer is a 4xx JSON error in Backstage's shape, consistent with the HTTP status.
  void ExpectJsonError(const RawResponse& r, const std::string& what) {
    EXPECT_GE(r.status, 400) << what;
    EXPECT_LT(r.status, 500) << what << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.headers.find("application/json"), std::string::npos) << what << "\n" << r.headers;
    Json body = Json::parse(r.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << what << ": not JSON: " << r.body.substr(0, 300);
    ASSERT_TRUE(body.contains("error") && body["error"].contains("name") && body["error"].contains("message"))
        << what << ": " << r.body.substr(0, 300);
    EXPECT_TRUE(body["error"]["name"].is_string());
    EXPECT_EQ(body["response"]["statusCode"], r.status) << what;
    EXPECT_EQ(r.body.find("TOPSECRET"), std::string::npos) << what;
  }

  void ExpectNothingWritten() { EXPECT_EQ(Snapshot(), before_); }

  int port() const { return server_->port(); }

  std::filesystem::path root_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<store::TaskStore> tasks_;
  std::unique_ptr<ApiServer> server_;
  std::string job_id_;
  std::string before_;
};

constexpr const char* kTrigger = "/api/demo/.backstage/scheduler/v1/tasks/";

TEST_F(BadInputTest, HugeBodiesAre413WithTheJsonErrorShape) {
  StartServer({});
  const std::string huge(2 << 20, 'a');
  const std::string body = R"({"kind":"k","payload":")" + huge + "\"}";
  RawResponse jobs = SendRaw(port(), Request("POST", "/api/octop/v1/jobs", body));
  EXPECT_EQ(jobs.status, 413);
  ExpectJsonError(jobs, "huge enqueue");
  RawResponse trigger = SendRaw(port(), Request("POST", std::string(kTrigger) + "t/trigger", huge));
  EXPECT_EQ(trigger.status, 413);
  ExpectJsonError(trigger, "huge trigger body");
  // Just under the limit is read and judged on its content (here: a payload too big for nothing else).
  ExpectNothingWritten();
}

TEST_F(BadInputTest, BadJsonAndBadFieldsAre400) {
  StartServer({});
  for (const std::string& body : std::vector<std::string>{
           R"({"kind":)", "not json", "[]", R"({"kind":42})", R"({"kind":""})",
           R"({"kind":"k","maxRetries":-1})", R"({"kind":"k","scheduledAt":"yesterday"})",
           R"({"kind":"k","priority":1e400})", std::string(100000, '['), "",
           R"({"kind":"k","payload":{"a":)"}) {
    RawResponse r = SendRaw(port(), Request("POST", "/api/octop/v1/jobs", body));
    EXPECT_EQ(r.status, 400) << body.substr(0, 60);
    ExpectJsonError(r, "bad json: " + body.substr(0, 60));
  }
  ExpectNothingWritten();
}

TEST_F(BadInputTest, InvalidUtf8InBodiesAndPathsIs400) {
  StartServer({});
  for (const std::string& body :
       std::vector<std::string>{std::string("{\"kind\":\"\xff\"}"), std::string("{\"kind\":\"k\xc3\"}"),
                                std::string("{\"kind\":\"k\",\"payload\":{\"x\":\"\xed\xa0\x80\"}}"),
                                std::string("{\"kind\":\"k\",\"queue\":\"\xc0\xaf\"}")}) {
    RawResponse r = SendRaw(port(), Request("POST", "/api/octop/v1/jobs", body));
    EXPECT_EQ(r.status, 400);
    ExpectJsonError(r, "utf-8 body");
  }
  for (const std::string& target :
       std::vector<std::string>{std::string(kTrigger) + "%FF/trigger", std::string(kTrigger) + "%C3/trigger",
                                std::string(kTrigger) + "\xff\xfe/trigger", "/api/octop/v1/jobs/%ED%A0%80"}) {
    RawResponse r =
        SendRaw(port(), Request(target.find("jobs/%ED") != std::string::npos ? "GET" : "POST", target));
    EXPECT_EQ(r.status, 400) << target;
    ExpectJsonError(r, "utf-8 path " + target);
  }
  // A query parameter a route reads is refused when it does not decode; dropping it would list every job
  // as if no filter had been asked for. Parameters no route reads are ignored, as Express ignores them.
  for (const std::string& target : std::vector<std::string>{
           "/api/octop/v1/jobs?kind=%FF", "/api/octop/v1/jobs?status=%C3", "/api/octop/v1/jobs?queue=a%00b",
           "/api/octop/v1/jobs?limit=%ZZ", "/api/octop/v1/jobs/summary?kind=%FF&x=1"}) {
    RawResponse r = SendRaw(port(), Request("GET", target));
    if (target.find("summary") != std::string::npos) {
      EXPECT_EQ(r.status, 200) << target;
      continue;
    }
    EXPECT_EQ(r.status, 400) << target;
    ExpectJsonError(r, "utf-8 query " + target);
    EXPECT_NE(r.body.find("is not valid percent-encoded UTF-8 text"), std::string::npos) << r.body;
  }
  ExpectNothingWritten();
}

TEST(SplitPathUtf8, RejectsOverlongFormsSurrogatesAndCodePointsBeyondUnicode) {
  for (const char* bad : {"/%ED%A0%80", "/%ED%BF%BF", "/%E0%80%AF", "/%F0%80%80%AF", "/%F4%90%80%80",
                          "/%C0%AF", "/%F5%80%80%80"}) {
    EXPECT_FALSE(ApiServer::SplitPath(bad).has_value()) << bad;
  }
  for (const char* good : {"/%ED%9F%BF", "/%E0%A0%80", "/%F0%90%80%80", "/%F4%8F%BF%BF", "/%C2%A9"}) {
    EXPECT_TRUE(ApiServer::SplitPath(good).has_value()) << good;
  }
}

TEST_F(BadInputTest, TraversalAndNulInIdsNeverReadAFile) {
  StartServer({});
  for (const std::string& id :
       std::vector<std::string>{"..", "..%2F..%2Fsecret.txt", "%2E%2E%2Fsecret.txt", "a%00b", "%2F",
                                "..%5C..", "t%2F..%2F..%2F..%2Fsecret.txt"}) {
    for (const std::string& action : std::vector<std::string>{"trigger", "cancel"}) {
      RawResponse r = SendRaw(port(), Request("POST", std::string(kTrigger) + id + "/" + action));
      EXPECT_TRUE(r.status == 400 || r.status == 404) << id << " " << r.status;
      ExpectJsonError(r, "id " + id);
    }
    RawResponse job = SendRaw(port(), Request("GET", "/api/octop/v1/jobs/" + id));
    EXPECT_TRUE(job.status == 400 || job.status == 404) << id;
    ExpectJsonError(job, "job id " + id);
    RawResponse retry = SendRaw(port(), Request("POST", "/api/octop/v1/jobs/" + id + "/retry"));
    ExpectJsonError(retry, "retry id " + id);
  }
  // Static files: nothing outside the web root, however the '..' is spelled.
  for (const std::string& target :
       std::vector<std::string>{"/../secret.txt", "/%2e%2e/secret.txt", "/..%2Fsecret.txt",
                                "/%2e%2e%2fsecret.txt", "/web/../../secret.txt", "/./../secret.txt",
                                "/index.html/../../secret.txt", "/%00/secret.txt", "/....//secret.txt"}) {
    RawResponse r = SendRaw(port(), Request("GET", target));
    EXPECT_GE(r.status, 400) << target;
    EXPECT_EQ(r.body.find("TOPSECRET"), std::string::npos) << target;
  }
  RawResponse index = SendRaw(port(), Request("GET", "/index.html"));
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("dashboard"), std::string::npos) << "the web root itself is served";
  ExpectNothingWritten();
}

TEST_F(BadInputTest, TenThousandCharacterIdsAreAJsonError) {
  StartServer({});
  const std::string long_id(10000, 'x');
  for (const std::string& target : std::vector<std::string>{
           std::string(kTrigger) + long_id + "/trigger", std::string(kTrigger) + long_id + "/cancel",
           "/api/octop/v1/jobs/" + long_id + "/retry", "/api/octop/v1/jobs/" + long_id + "/cancel",
           "/api/octop/v1/queues/" + long_id + "/pause",
           "/api/" + long_id + "/.backstage/scheduler/v1/tasks"}) {
    RawResponse r = SendRaw(port(), Request(target.ends_with("tasks") ? "GET" : "POST", target));
    ExpectJsonError(r, "long id " + target.substr(0, 40));
  }
  RawResponse get = SendRaw(port(), Request("GET", "/api/octop/v1/jobs/" + long_id));
  ExpectJsonError(get, "long job id");
  // Just past the 255-byte column limit, well within the URL limit: a clear 400/404, not a 500.
  const std::string id256(256, 'y');
  RawResponse r = SendRaw(port(), Request("POST", std::string(kTrigger) + id256 + "/trigger"));
  EXPECT_TRUE(r.status == 400 || r.status == 404) << r.status;
  ExpectJsonError(r, "256-byte id");
  RawResponse pause = SendRaw(port(), Request("POST", "/api/octop/v1/queues/" + id256 + "/pause"));
  EXPECT_EQ(pause.status, 400);
  ExpectJsonError(pause, "256-byte queue");
  ExpectNothingWritten();
}

TEST_F(BadInputTest, BearerTokenGuardsEveryPostAndGetsStayOpen) {
  StartServer({.token = std::string("s3cret-token")});
  const std::string target = std::string(kTrigger) + "t/trigger";
  for (const std::string& header :
       std::vector<std::string>{std::string(""), std::string("Authorization: Bearer wrong-token!\r\n"),
                                std::string("Authorization: Bearer s3cret-toke\r\n"),
                                std::string("Authorization: Bearer s3cret-token2\r\n"),
                                std::string("Authorization: s3cret-token\r\n"),
                                std::string("Authorization: Basic czNjcmV0LXRva2Vu\r\n")}) {
    RawResponse r = SendRaw(port(), Request("POST", target, "", header));
    EXPECT_EQ(r.status, 401) << header;
    ExpectJsonError(r, "auth " + header);
    EXPECT_NE(r.headers.find("WWW-Authenticate: Bearer"), std::string::npos);
    RawResponse enqueue = SendRaw(port(), Request("POST", "/api/octop/v1/jobs", R"({"kind":"k"})", header));
    EXPECT_EQ(enqueue.status, 401);
  }
  ExpectNothingWritten();
  EXPECT_EQ(SendRaw(port(), Request("GET", "/api/demo/.backstage/scheduler/v1/tasks")).status, 200);
  RawResponse ok = SendRaw(port(), Request("POST", target, "", "Authorization: Bearer s3cret-token\r\n"));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(BadInputTest, ProtectedReadsNeedTheTokenWhileProbesStayOpen) {
  const std::string auth = "Authorization: Bearer s3cret-token\r\n";
  StartServer({.token = std::string("s3cret-token"), .protect_reads = true});
  for (const std::string target : {"/api/demo/.backstage/scheduler/v1/tasks", "/api/octop/v1/jobs",
                                   "/api/octop/v1/plugins", "/api/octop/v1/jobs/summary"}) {
    RawResponse refused =
        SendRaw(port(), Request("GET", target, "", "Authorization: Bearer wrong-token!\r\n"));
    EXPECT_EQ(refused.status, 401) << target;
    ExpectJsonError(refused, "read " + target);
    EXPECT_EQ(refused.body.find("\"jobs\":"), std::string::npos) << "nothing of the answer leaks";
    EXPECT_EQ(SendRaw(port(), Request("GET", target)).status, 401) << target;
    EXPECT_EQ(SendRaw(port(), Request("GET", target, "", auth)).status, 200) << target;
  }
  EXPECT_EQ(SendRaw(port(), Request("GET", "/healthz")).status, 200);
  EXPECT_EQ(SendRaw(port(), Request("GET", "/readyz")).status, 200);
  EXPECT_EQ(SendRaw(port(), Request("GET", "/metrics")).status, 200) << "metrics are guarded on their own";
  server_->Stop();

  StartServer({.token = std::string("s3cret-token"), .protect_metrics = true});
  EXPECT_EQ(SendRaw(port(), Request("GET", "/metrics")).status, 401);
  EXPECT_EQ(SendRaw(port(), Request("GET", "/metrics", "", auth)).status, 200);
  EXPECT_EQ(SendRaw(port(), Request("GET", "/api/octop/v1/plugins")).status, 200) << "reads stay open";
  EXPECT_EQ(SendRaw(port(), Request("GET", "/healthz")).status, 200);
}

TEST_F(BadInputTest, JobListsAreBoundedByPayloadBytes) {
  StartServer({});
  // Five 0.9 MB payloads: a list answer carries the newest four (a 4 MiB budget) and the size of the fifth.
  const std::string big = "\"" + std::string(900000, 'x') + "\"";
  for (int i = 0; i < 5; ++i) {
    RawResponse r =
        SendRaw(port(), Request("POST", "/api/octop/v1/jobs", R"({"kind":"big","payload":)" + big + "}"));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  RawResponse list = SendRaw(port(), Request("GET", "/api/octop/v1/jobs?kind=big&limit=1000"));
  ASSERT_EQ(list.status, 200);
  const auto body = nlohmann::json::parse(list.body);
  ASSERT_EQ(body["jobs"].size(), 5u);
  int carried = 0;
  for (const auto& job : body["jobs"]) {
    if (job.contains("payloadOmittedBytes")) {
      EXPECT_EQ(job["payloadOmittedBytes"], big.size());
      EXPECT_TRUE(job["payload"].is_null());
    } else {
      ++carried;
    }
  }
  EXPECT_EQ(carried, 4);
  EXPECT_LT(list.body.size(), std::size_t{5} << 20);
  RawResponse bare = SendRaw(port(), Request("GET", "/api/octop/v1/jobs?payload=false"));
  ASSERT_EQ(bare.status, 200);
  EXPECT_LT(bare.body.size(), std::size_t{10000});
  EXPECT_EQ(SendRaw(port(), Request("GET", "/api/octop/v1/jobs?payload=maybe")).status, 400);
  // The job itself still has its payload.
  const std::string id = body["jobs"][4]["id"];
  RawResponse one = SendRaw(port(), Request("GET", "/api/octop/v1/jobs/" + id));
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(nlohmann::json::parse(one.body)["payload"].get<std::string>().size(), big.size() - 2);
}

TEST_F(BadInputTest, BindingBeyondLoopbackWithoutATokenWarns) {
  std::vector<std::string> warnings;
  StartServer({.host = "0.0.0.0", .warn = [&](std::string_view w) { warnings.emplace_back(w); }});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("without a bearer token"), std::string::npos) << warnings[0];
  server_->Stop();

  warnings.clear();
  StartServer({.host = "0.0.0.0", .token = std::string("t"), .warn = [&](std::string_view w) {
                 warnings.emplace_back(w);
               }});
  EXPECT_TRUE(warnings.empty());
  server_->Stop();
  StartServer({.warn = [&](std::string_view w) { warnings.emplace_back(w); }});
  EXPECT_TRUE(warnings.empty()) << "the default bind is loopback";
  EXPECT_EQ(ApiServerOptions{}.host, "127.0.0.1");
}

// ---- Hostile clients (docs/reliability.md, "Threat model") ------------------------------------------------

std::string Nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST_F(BadInputTest, DeeplyNestedJsonIsRefusedBeforeItIsParsed) {
  StartServer({});
  // 200,000 levels in 400 KB: within the body limit, and deep enough to overflow the stack of any recursive
  // serialiser.
  for (const std::string& body :
       std::vector<std::string>{R"({"kind":"k","payload":)" + Nested(200000) + "}",
                                R"({"kind":"k","payload":)" + Nested(kMaxJsonDepth) + "}", Nested(300000)}) {
    RawResponse r = SendRaw(port(), Request("POST", "/api/octop/v1/jobs", body));
    EXPECT_EQ(r.status, 400) << body.size();
    ExpectJsonError(r, "deep json");
    EXPECT_NE(r.body.find("deeper than"), std::string::npos) << r.body;
  }
  ExpectNothingWritten();
  // The deepest payload allowed is stored and read back whole (the object around it is one more level).
  const std::string deepest = Nested(kMaxJsonDepth - 1);
  RawResponse ok =
      SendRaw(port(), Request("POST", "/api/octop/v1/jobs", R"({"kind":"deep","payload":)" + deepest + "}"));
  ASSERT_EQ(ok.status, 201) << ok.body;
  const std::string id = Json::parse(ok.body)["id"];
  RawResponse read = SendRaw(port(), Request("GET", "/api/octop/v1/jobs/" + id));
  ASSERT_EQ(read.status, 200);
  EXPECT_EQ(Json::parse(read.body)["payload"].dump(), deepest);
}

TEST_F(BadInputTest, PayloadsStoredTooDeepAreListedAsText) {
  // A payload written before the bound existed (or by another writer) is shown as its text, not
  // re-serialised.
  auto store = store::OpenJobStore("sqlite:" + (root_ / "db").string(), {.ns = "octop"});
  ASSERT_TRUE(store.ok());
  JobSpec job;
  job.queue = "default";
  job.kind = "old";
  job.payload = "[]";
  auto ids = (*store)->EnqueueJobs({job});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  // Below the store's own check, as an older release would have written it.
  const std::string deep = Nested(500);  // deeper than kMaxJsonDepth, within what SQLite calls JSON
  ASSERT_TRUE(
      (*store)
          ->WithTransaction([&](Transaction& tx) -> Status {
            return tx.Execute("UPDATE octop_jobs SET payload = $1 WHERE kind = 'old'", {deep}).status();
          })
          .ok());
  StartServer({});
  RawResponse list = SendRaw(port(), Request("GET", "/api/octop/v1/jobs?kind=old"));
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(Json::parse(list.body)["jobs"][0]["payload"], deep);
}

TEST_F(BadInputTest, CrossSiteRequestsThatChangeStateAreRefused) {
  StartServer({});
  const std::string trigger = std::string(kTrigger) + "t/trigger";
  const std::string enqueue = "/api/octop/v1/jobs";
  const std::string job = R"({"kind":"k"})";
  auto raw = [&](const std::string& target, const std::string& headers, const std::string& body) {
    return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port()) +
           "\r\nConnection: close\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  };
  struct Case {
    std::string what;
    std::string headers;
    int status;
  };
  const std::vector<Case> cases = {
      {"foreign origin", "Origin: http://localhost:8111\r\nContent-Type: application/json\r\n", 403},
      {"null origin", "Origin: null\r\nContent-Type: application/json\r\n", 403},
      {"cross-site fetch", "Sec-Fetch-Site: cross-site\r\nContent-Type: application/json\r\n", 403},
      {"same-site fetch", "Sec-Fetch-Site: same-site\r\nContent-Type: application/json\r\n", 403},
      {"text/plain body", "Content-Type: text/plain\r\n", 415},
      {"form body", "Content-Type: application/x-www-form-urlencoded\r\n", 415},
      {"no content type", "", 415},
  };
  for (const Case& c : cases) {
    RawResponse r = SendRaw(port(), raw(enqueue, c.headers, job));
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
    ExpectJsonError(r, c.what);
    if (c.status == 403) {
      EXPECT_EQ(Json::parse(r.body)["error"]["name"], "NotAllowedError") << c.what;
      RawResponse t = SendRaw(port(), raw(trigger, c.headers, ""));
      EXPECT_EQ(t.status, 403) << c.what << " (trigger)";
    }
  }
  ExpectNothingWritten();
  // What the dashboard sends (its own origin) and what curl sends (no Origin) go through.
  const std::string origin = "Origin: http://127.0.0.1:" + std::to_string(port()) + "\r\n";
  RawResponse own = SendRaw(port(), raw(enqueue,
                                        origin + "Sec-Fetch-Site: same-origin\r\n" +
                                            "Content-Type: application/json; charset=utf-8\r\n",
                                        job));
  EXPECT_EQ(own.status, 201) << own.body;
  RawResponse curl = SendRaw(port(), raw(trigger, "", ""));
  EXPECT_EQ(curl.status, 200) << curl.body;
}

TEST_F(BadInputTest, AForeignHostHeaderIsRefusedExceptOnProbes) {
  StartServer({.allowed_hosts = {"octop.internal"}});
  auto get = [&](const std::string& target, const std::string& host) {
    return SendRaw(port(), "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
  };
  // A DNS-rebinding page reaches the server under its own name.
  for (const std::string& target : std::vector<std::string>{"/api/octop/v1/jobs", "/", "/index.html",
                                                            "/api/demo/.backstage/scheduler/v1/tasks"}) {
    RawResponse r = get(target, "attacker.example:7007");
    EXPECT_EQ(r.status, 403) << target;
    ExpectJsonError(r, "rebinding " + target);
    EXPECT_EQ(r.body.find("dashboard"), std::string::npos);
  }
  for (const std::string& target : std::vector<std::string>{"/healthz", "/readyz", "/metrics"}) {
    EXPECT_EQ(get(target, "attacker.example").status, 200) << target;
  }
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1", "127.0.0.1:7007", "localhost:7007", "[::1]:7007", "10.1.2.3",
                                "OCTOP.internal:80", "app.localhost"}) {
    EXPECT_EQ(get("/api/octop/v1/jobs", host).status, 200) << host;
  }
}

TEST_F(BadInputTest, CompressedBodiesAreRefusedUnread) {
  StartServer({});
  // 20 KB of gzip that would inflate to 20 MiB: refused on its header, before a byte is decompressed.
  const std::string body(20000, 'x');
  for (const std::string& encoding : std::vector<std::string>{"gzip", "br", "deflate", "GZIP"}) {
    RawResponse r = SendRaw(
        port(), Request("POST", "/api/octop/v1/jobs", body, "Content-Encoding: " + encoding + "\r\n"));
    EXPECT_EQ(r.status, 415) << encoding;
    ExpectJsonError(r, "encoding " + encoding);
  }
  ExpectNothingWritten();
}

TEST_F(BadInputTest, EveryAnswerForbidsSniffingAndFraming) {
  StartServer({});
  for (const std::string& target :
       std::vector<std::string>{"/", "/index.html", "/api/octop/v1/jobs", "/healthz", "/nope"}) {
    RawResponse r = SendRaw(port(), Request("GET", target));
    EXPECT_NE(r.headers.find("X-Content-Type-Options: nosniff"), std::string::npos) << target << r.headers;
    EXPECT_NE(r.headers.find("X-Frame-Options: DENY"), std::string::npos) << target;
    // And its Date, an IMF-fixdate, as Express sends.
    EXPECT_TRUE(std::regex_search(r.headers, std::regex("\r\nDate: [A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} "
                                                        "[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT\r\n")))
        << target << r.headers;
    EXPECT_NE(r.headers.find("frame-ancestors 'none'"), std::string::npos) << target;
  }
}

// Slow clients (a header a byte at a time, never finished) and idle keep-alive clients each hold a
// connection; with httplib's fixed pool of 8 threads, 8 of them stopped every probe. 100 slow and 8 idle ones
// here.
TEST_F(BadInputTest, SlowAndIdleClientsDoNotStarveTheProbes) {
  StartServer({});
  std::vector<int> held;
  for (int i = 0; i < 100; ++i) {
    const int fd = ConnectLoopback(port());
    const std::string partial = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    EXPECT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL), static_cast<ssize_t>(partial.size()));
    held.push_back(fd);
  }
  for (int i = 0; i < 8; ++i) {  // a finished request on a connection left open (keep-alive)
    const int fd = ConnectLoopback(port());
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    held.push_back(fd);
  }
  std::chrono::steady_clock::duration slowest{};
  for (int i = 0; i < 15; ++i) {
    const auto start = std::chrono::steady_clock::now();
    RawResponse r = SendRaw(port(), Request("GET", "/healthz"));
    const auto took = std::chrono::steady_clock::now() - start;
    slowest = std::max(slowest, took);
    EXPECT_EQ(r.status, 200) << "probe " << i;
    // Starved, a probe waits for a held connection's 10 s read timeout; served, it takes milliseconds.
    EXPECT_LT(took, std::chrono::seconds(2)) << "probe " << i;
  }
  std::printf("[ figures  ] 15 probes beside 100 slow and 8 idle connections: slowest %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count()));
  for (int fd : held) ::close(fd);
}

TEST_F(BadInputTest, ConnectionsBeyondTheBoundAreAnswered503AtOnce) {
  ApiServerOptions options;
  options.max_connections = 4;
  StartServer(options);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(ConnectLoopback(port()));  // each waits for its request
  const auto start = std::chrono::steady_clock::now();
  RawResponse refused = SendRaw(port(), Request("GET", "/healthz"));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(refused.status, 503) << refused.headers;
  const Json body = Json::parse(refused.body, nullptr, false);
  EXPECT_TRUE(body.contains("error") && body["error"]["message"].is_string()) << refused.body;
  EXPECT_EQ(body["response"]["statusCode"], 503) << refused.body;
  EXPECT_NE(refused.headers.find("Retry-After: 1"), std::string::npos) << refused.headers;
  EXPECT_NE(refused.headers.find("Content-Security-Policy: frame-ancestors 'none'"), std::string::npos)
      << refused.headers;
  // Refused, not queued behind the held connections (each would hold its place for up to 5 s).
  EXPECT_LT(took, std::chrono::seconds(2));
  for (int fd : held) ::close(fd);
  EXPECT_TRUE(Eventually([&] { return SendRaw(port(), Request("GET", "/healthz")).status == 200; }));
}

TEST_F(BadInputTest, RequestHeadsAreBoundedInFieldsBytesAndTime) {
  ApiServerOptions options;
  options.header_timeout = std::chrono::seconds(1);
  StartServer(options);
  auto fields = [](int n, std::size_t value_bytes) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += "X-Field-" + std::to_string(i) + ": " + std::string(value_bytes, 'v') + "\r\n";
    return out;
  };
  // Host and Connection, and 98 more: 100 fields are served; 101 are not.
  EXPECT_EQ(SendRaw(port(), Request("GET", "/healthz", "", fields(98, 8))).status, 200);
  RawResponse many = SendRaw(port(), Request("GET", "/healthz", "", fields(99, 8)));
  EXPECT_EQ(many.status, 431);
  ExpectJsonError(many, "101 fields");
  // Ten fields of 7 KiB (each line within httplib's 8 KiB): 70 KiB of head.
  RawResponse large = SendRaw(port(), Request("GET", "/healthz", "", fields(10, 7 * 1024)));
  EXPECT_EQ(large.status, 431);
  ExpectJsonError(large, "70 KiB");
  // A head sent one field at a time, each within the per-read timeout: cut at the head's deadline.
  const int fd = ConnectLoopback(port());
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string line = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  ASSERT_EQ(::send(fd, line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  std::string raw;
  RawResponse slow;
  for (int i = 0; i < 100 && slow.status == 0; ++i) {
    const std::string field = "X-Slow-" + std::to_string(i) + ": 1\r\n";
    if (::send(fd, field.data(), field.size(), MSG_NOSIGNAL) <= 0) break;  // closed by the server
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) slow = ReadAnswer(fd, raw);  // a slow client's pace, not a wait for an event
  }
  if (slow.status == 0) slow = ReadAnswer(fd, raw);
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_EQ(slow.status, 408);
  ExpectJsonError(slow, "slow head");
  EXPECT_GE(took, std::chrono::seconds(1));
  EXPECT_LT(took, std::chrono::seconds(8)) << "the deadline counts from the head's first byte";
}

TEST_F(BadInputTest, PipelinedRequestsAreEachAnswered) {
  StartServer({});
  const int fd = ConnectLoopback(port());
  ASSERT_GE(fd, 0);
  const std::string keep = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::string pipelined = keep + keep + Request("GET", "/api/octop/v1/jobs/not-a-job");
  ASSERT_EQ(::send(fd, pipelined.data(), pipelined.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(pipelined.size()));
  std::string raw;
  EXPECT_EQ(ReadAnswer(fd, raw).status, 200);
  EXPECT_EQ(ReadAnswer(fd, raw).status, 200);
  RawResponse third = ReadAnswer(fd, raw);
  EXPECT_EQ(third.status, 404);
  ExpectJsonError(third, "third pipelined request");
  ::close(fd);
}

TEST_F(BadInputTest, SmugglingShapesAndNulTargetsAreRefused) {
  StartServer({});
  const std::string job = R"({"kind":"k"})";
  const std::string head =
      "POST /api/octop/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\n";
  for (const std::string& framing :
       std::vector<std::string>{"Content-Length: 12\r\nContent-Length: 40\r\n",
                                "Content-Length: 12\r\nTransfer-Encoding: chunked\r\n",
                                "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"}) {
    RawResponse r = SendRaw(port(), head + framing + "\r\n" + job);
    EXPECT_EQ(r.status, 400) << framing;
    ExpectJsonError(r, framing);
  }
  ExpectNothingWritten();
  // A NUL in a static file's name: refused, never served as index.html.
  RawResponse nul = SendRaw(port(), Request("GET", "/index.html%00.js"));
  EXPECT_EQ(nul.status, 400);
  EXPECT_EQ(nul.body.find("dashboard"), std::string::npos);
}

}  // namespace
}  // namespace octop::http
