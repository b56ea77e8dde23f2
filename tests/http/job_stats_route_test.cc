// GET /api/octop/v1/jobs/stats over a real ApiServer on an ephemeral port: the JSON shape the dashboard's
// sparkline reads, the window/bucket/queue/kind parameters, and 400s for bad ones. Jobs are claimed and
// completed through the queue's store (the queue is not started) with a FakeClock as the database's now,
// so every bucket and latency is exact.
#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <octop/queue.h>
#include <octop/scheduler.h>
#include <octop/testing/fake_clock.h>

#include "http/api_server.h"
#include "http/job_routes.h"
#include "http/monitoring_cache.h"
#include "store/job_store.h"

namespace octop::http {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

class JobStatsRoute : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("octop-stats-route-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::string url = "sqlite:" + dir_.string();
    JobQueueOptions options;
    options.database_url = url;
    options.clock = &clock_;
    auto queue = JobQueue::Open(options);
    ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    queue_ = std::move(*queue);
    // The claims and completions of Finish, written as a worker would, at the fake clock's times.
    auto direct = store::OpenJobStore(url, {.ns = "octop", .clock = &clock_});
    ASSERT_TRUE(direct.ok()) << direct.status().ToString();
    direct_ = std::move(*direct);
    SchedulerOptions scheduler_options;
    scheduler_options.database_url = url;
    scheduler_options.clock = &clock_;
    scheduler_ = std::make_unique<Scheduler>(scheduler_options);
    server_ = std::make_unique<ApiServer>(*scheduler_, ApiServerOptions{.port = 0});
    AddJobRoutes(*server_, *queue_);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    scheduler_.reset();
    direct_.reset();
    queue_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A job of `kind` enqueued now, claimed after `latency`, succeeded (or failed for good) after `run`.
  void Finish(const std::string& kind, milliseconds latency, milliseconds run, bool succeed = true) {
    JobSpec spec;
    spec.kind = kind;
    spec.max_retries = 0;
    auto id = queue_->Enqueue(spec);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    clock_.Advance(latency);
    auto claimed = direct_->ClaimJobs({.queue = "default", .limit = 1, .worker_id = "t"});
    ASSERT_TRUE(claimed.ok() && claimed->size() == 1u);
    clock_.Advance(run);
    auto applied =
        direct_->CompleteJobs({{.id = claimed->front().id,
                                .attempt_token = claimed->front().attempt_token.value_or(""),
                                .outcome = succeed ? store::JobOutcome::kSuccess : store::JobOutcome::kFail,
                                .error = succeed ? std::nullopt : std::optional<std::string>("boom")}});
    ASSERT_TRUE(applied.ok() && applied->front());
  }

  Json Get(const std::string& target, int expected_status = 200) {
    auto res = client_->Get(target);
    EXPECT_TRUE(res) << "no response to " << target;
    if (!res) return Json();
    EXPECT_EQ(res->status, expected_status) << target << ": " << res->body;
    return Json::parse(res->body, nullptr, false);
  }

  octop::testing::FakeClock clock_;  // 2026-01-01T00:00:00Z; declared first: outlives everything
  std::filesystem::path dir_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<store::JobStore> direct_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(JobStatsRoute, ReturnsEveryBucketWithCountsAndLatencies) {
  clock_.Advance(seconds(30));
  Finish("greet", milliseconds(1500), milliseconds(250));  // ends 00:00:31.750
  Finish("greet", milliseconds(500), milliseconds(750));   // ends 00:00:33.000
  Finish("ledger", milliseconds(100), milliseconds(100), /*succeed=*/false);

  const Json stats = Get("/api/octop/v1/jobs/stats?window=5m&bucket=60s");
  EXPECT_EQ(stats["now"], "2026-01-01T00:00:33.200Z");
  EXPECT_EQ(stats["from"], "2025-12-31T23:56:00.000Z");
  EXPECT_EQ(stats["to"], "2026-01-01T00:01:00.000Z");
  EXPECT_EQ(stats["bucketSeconds"], 60.0);
  EXPECT_EQ(stats["totals"], Json::parse(R"({"succeeded":2,"frozen":1})"));
  ASSERT_EQ(stats["buckets"].size(), 5u);
  EXPECT_EQ(stats["buckets"][0], Json::parse(R"({"t":"2025-12-31T23:56:00.000Z","succeeded":0,"frozen":0,
      "avgLatencyMs":null,"maxLatencyMs":null,"avgRunMs":null})"));
  EXPECT_EQ(stats["buckets"][4], Json::parse(R"({"t":"2026-01-01T00:00:00.000Z","succeeded":2,"frozen":1,
      "avgLatencyMs":1000.0,"maxLatencyMs":1500.0,"avgRunMs":500.0})"));

  // The defaults are one hour in minutes; kind narrows.
  const Json hour = Get("/api/octop/v1/jobs/stats");
  EXPECT_EQ(hour["buckets"].size(), 60u);
  EXPECT_EQ(hour["bucketSeconds"], 60.0);
  const Json ledger = Get("/api/octop/v1/jobs/stats?window=PT5M&bucket=1m&kind=ledger");
  EXPECT_EQ(ledger["totals"], Json::parse(R"({"succeeded":0,"frozen":1})"));
  EXPECT_EQ(ledger["buckets"][4]["avgLatencyMs"], nullptr);
  const Json other = Get("/api/octop/v1/jobs/stats?queue=elsewhere");
  EXPECT_EQ(other["totals"], Json::parse(R"({"succeeded":0,"frozen":0})"));
}

TEST_F(JobStatsRoute, BadParametersAre400WithTheReason) {
  Json error = Get("/api/octop/v1/jobs/stats?bucket=soon", 400);
  EXPECT_EQ(error["error"]["name"], "InputError");
  EXPECT_EQ(error["error"]["message"], "'bucket' must be a duration such as 1h, 60s or PT1H, got 'soon'");
  error = Get("/api/octop/v1/jobs/stats?window=30d", 400);
  EXPECT_EQ(error["error"]["message"], "job stats: the window must be between 1 second and 7 days");
  error = Get("/api/octop/v1/jobs/stats?window=1h&bucket=1s", 400);
  EXPECT_EQ(error["error"]["message"], "job stats: at most 1440 buckets, got 3600 (window / bucket)");
  // Not taken for a job id.
  EXPECT_EQ(Get("/api/octop/v1/jobs/stats?bucket=500ms", 400)["error"]["name"], "InputError");
  // A name that does not decode is refused, not dropped (which would answer for every kind).
  error = Get("/api/octop/v1/jobs/stats?kind=%FF", 400);
  EXPECT_EQ(error["error"]["message"], "Query parameter 'kind' is not valid percent-encoded UTF-8 text");
  EXPECT_EQ(Get("/api/octop/v1/jobs/stats?queue=a%00b", 400)["error"]["name"], "InputError");
  EXPECT_EQ(Get("/api/octop/v1/jobs/stats?window=%ZZ", 400)["error"]["name"], "InputError");
}

// On a large job table the summary and stats answers are reused for a while (monitoring_cache.h); here
// "large" is three jobs and the reuse lasts the policy's minimum, two seconds of the fake clock.
TEST_F(JobStatsRoute, OnALargeTableMonitoringAnswersAreReusedUntilTheyAgeOrAnOperatorActs) {
  ApiServer server(*scheduler_, ApiServerOptions{.port = 0});
  AddJobRoutes(server, *queue_,
               {.min_jobs = 3, .reuse_factor = 20, .min_reuse = milliseconds(2000), .clock = &clock_});
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  auto get = [&](const std::string& target) {
    auto res = client.Get(target);
    EXPECT_TRUE(res && res->status == 200) << target;
    return res ? Json::parse(res->body, nullptr, false) : Json();
  };
  auto succeeded = [&]() -> Json {
    const Json summary = get("/api/octop/v1/jobs/summary");
    for (const Json& c : summary["counts"]) {
      if (c["status"] == "success") return c["count"];
    }
    return 0;
  };
  const std::string stats = "/api/octop/v1/jobs/stats?window=5m&bucket=60s";
  // Two jobs: below the size, every answer is new.
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(succeeded(), 1);
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(succeeded(), 2);
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 2);
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 3) << "kept while the last summary counted two jobs";
  // The summary counts three: from now on its answer and the stats' are kept.
  EXPECT_EQ(succeeded(), 3);
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 3);
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(succeeded(), 3) << "a young answer was computed again";
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 3);
  EXPECT_EQ(get("/api/octop/v1/jobs/stats?window=10m&bucket=60s")["totals"]["succeeded"], 4)
      << "other parameters are another answer";

  // Aged out.
  clock_.Advance(milliseconds(1999));
  EXPECT_EQ(succeeded(), 3);
  clock_.Advance(milliseconds(2));
  EXPECT_EQ(succeeded(), 4);
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 4);
  // An operator's action drops what was kept: its effect shows at once.
  Finish("k", milliseconds(0), milliseconds(0));
  auto paused = client.Post("/api/octop/v1/queues/default/pause", "", "application/json");
  ASSERT_TRUE(paused && paused->status == 200);
  const Json summary = get("/api/octop/v1/jobs/summary");
  EXPECT_EQ(summary["pausedQueues"], Json::parse(R"(["default"])"));
  EXPECT_EQ(succeeded(), 5);
  EXPECT_EQ(get(stats)["totals"]["succeeded"], 5);
  auto resumed = client.Post("/api/octop/v1/queues/default/resume", "", "application/json");
  ASSERT_TRUE(resumed && resumed->status == 200);
  EXPECT_EQ(get("/api/octop/v1/jobs/summary")["pausedQueues"], Json::array());
  // So does a cancel.
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(succeeded(), 5);
  auto waiting = queue_->Enqueue({.kind = "k"});
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  auto cancelled = client.Post("/api/octop/v1/jobs/" + waiting->id + "/cancel", "", "application/json");
  ASSERT_TRUE(cancelled && cancelled->status == 200) << (cancelled ? cancelled->body : "no response");
  EXPECT_EQ(succeeded(), 6);
}

// Job lists are kept as the summary is: the dashboard asks for two every 2 s, and on a large history each
// reads it all. A list of more than 1 MiB is never kept (memory), and an operator's action drops the rest.
TEST_F(JobStatsRoute, OnALargeTableJobListsAreReusedExceptLargeOnes) {
  ApiServer server(*scheduler_, ApiServerOptions{.port = 0});
  AddJobRoutes(server, *queue_,
               {.min_jobs = 3, .reuse_factor = 20, .min_reuse = milliseconds(2000), .clock = &clock_});
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  auto count = [&](const std::string& target) -> std::size_t {
    auto res = client.Get(target);
    EXPECT_TRUE(res && res->status == 200) << target;
    return res ? Json::parse(res->body, nullptr, false)["jobs"].size() : 0;
  };
  const std::string succeeded = "/api/octop/v1/jobs?status=success";
  for (int i = 0; i < 3; ++i) Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(count(succeeded), 3u) << "not kept: no summary has counted the jobs yet";
  auto summary = client.Get("/api/octop/v1/jobs/summary");
  ASSERT_TRUE(summary && summary->status == 200);
  EXPECT_EQ(count(succeeded), 3u);
  Finish("k", milliseconds(0), milliseconds(0));
  EXPECT_EQ(count(succeeded), 3u) << "a young list was read again";
  EXPECT_EQ(count(succeeded + "&limit=10"), 4u) << "another limit is another answer";
  EXPECT_EQ(count(succeeded + "&payload=false"), 4u) << "so is another payload budget";
  EXPECT_EQ(count("/api/octop/v1/jobs?status=success&kind=k"), 4u) << "and another kind";
  clock_.Advance(milliseconds(2001));
  EXPECT_EQ(count(succeeded), 4u) << "aged out";

  // An operator's action drops the kept lists: the retried job shows as waiting at once.
  Finish("k", milliseconds(0), milliseconds(0), /*succeed=*/false);
  const std::string frozen = "/api/octop/v1/jobs?status=frozen";
  EXPECT_EQ(count(frozen), 1u);
  auto listed = client.Get(frozen);
  ASSERT_TRUE(listed);
  const std::string id = Json::parse(listed->body)["jobs"][0]["id"];
  auto retried = client.Post("/api/octop/v1/jobs/" + id + "/retry", "", "application/json");
  ASSERT_TRUE(retried && retried->status == 200) << (retried ? retried->body : "no response");
  EXPECT_EQ(count(frozen), 0u);
  EXPECT_EQ(count("/api/octop/v1/jobs?status=pending"), 1u);

  // A list over 1 MiB is computed each time.
  const std::string pending = "/api/octop/v1/jobs?status=pending&kind=big";
  JobSpec big{.kind = "big", .payload = "\"" + std::string(1100 * 1024, 'x') + "\""};
  ASSERT_TRUE(queue_->Enqueue(big).ok());
  EXPECT_EQ(count(pending), 1u);
  ASSERT_TRUE(queue_->Enqueue(big).ok());
  EXPECT_EQ(count(pending), 2u) << "a list of more than 1 MiB was kept";
}

// Who computes while another answer is being computed: on a small table, anyone; until a summary has counted
// the jobs (a node that just started, ten dashboards open on it) only one, so a large table is read once.
TEST(MonitoringCacheConcurrency, SideBySideOnASmallTableOneAtATimeUntilCounted) {
  for (const bool counted_small : {true, false}) {
    SCOPED_TRACE(counted_small ? "a summary counted 2 jobs" : "no summary yet");
    MonitoringCache cache({.min_jobs = 3});
    if (counted_small) cache.NoteJobCount(2);
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> first_done{false};
    std::thread first([&] {
      auto r = cache.Get("first", [&]() -> Result<ApiResponse> {
        entered.set_value();
        released.wait();
        first_done = true;
        return ApiResponse::Json("{}");
      });
      EXPECT_TRUE(r.ok());
    });
    ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
    bool saw_first_done = false;
    auto second = std::async(std::launch::async, [&] {
      return cache.Get("second", [&]() -> Result<ApiResponse> {
        saw_first_done = first_done;
        return ApiResponse::Json("{}");
      });
    });
    if (counted_small) {
      // Answered while the first is still being computed.
      EXPECT_EQ(second.wait_for(std::chrono::seconds(30)), std::future_status::ready);
      release.set_value();
    } else {
      // Still waiting for the first a while later (an observation window: a wrong cache answers at once).
      EXPECT_EQ(second.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
      release.set_value();
    }
    EXPECT_TRUE(second.get().ok());
    first.join();
    EXPECT_EQ(saw_first_done, !counted_small);
  }
}

}  // namespace
}  // namespace octop::http
