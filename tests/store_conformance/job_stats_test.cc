// Store::ComputeJobStats (the dashboard's throughput/latency sparkline) on every backend: the epoch-aligned
// bucket grid, which finished jobs count where, latencies over the succeeded ones, the queue/kind filters,
// the window's edges, and bad parameters. The fake clock is the database's now, so every time is exact.
#include <string>
#include <vector>

#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class JobStatsTest : public StoreConformance {
 protected:
  std::string Enqueue(std::string queue = "default", std::string kind = "k", int max_retries = 3) {
    JobSpec job;
    job.queue = std::move(queue);
    job.kind = std::move(kind);
    job.max_retries = max_retries;
    auto out = jobs_->EnqueueJobs({job});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() && out->size() == 1 ? out->front().id : "";
  }
  JobInfo ClaimOne(const std::string& queue = "default") {
    auto jobs = jobs_->ClaimJobs({.queue = queue, .limit = 1, .worker_id = "w"});
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    EXPECT_EQ(jobs.ok() ? jobs->size() : 0u, 1u);
    return jobs.ok() && !jobs->empty() ? jobs->front() : JobInfo{};
  }
  void Complete(const JobInfo& job, JobOutcome outcome) {
    auto applied = jobs_->CompleteJobs(
        {{.id = job.id,
          .attempt_token = job.attempt_token.value_or(""),
          .outcome = outcome,
          .error = outcome == JobOutcome::kSuccess ? std::nullopt : std::optional<std::string>("boom"),
          .retry_delay = seconds(30)}});
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    ASSERT_EQ(*applied, std::vector<bool>{true});
  }
  // Enqueued now, started after `latency`, succeeded after `run`.
  void RunToSuccess(milliseconds latency, milliseconds run, const std::string& queue = "default",
                    const std::string& kind = "k") {
    Enqueue(queue, kind);
    clock_.Advance(latency);
    const JobInfo job = ClaimOne(queue);
    clock_.Advance(run);
    Complete(job, JobOutcome::kSuccess);
  }
  JobStats Stats(JobStatsFilter params = {.window = minutes(5), .bucket = minutes(1)}) {
    auto stats = jobs_->ComputeJobStats(params);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : JobStats{};
  }
};

std::vector<Backend> BackendsNamed(const std::string& name) {
  std::vector<Backend> out;
  for (Backend& b : AllBackends()) {
    if (b.name == name) out.push_back(std::move(b));
  }
  return out;
}
std::string BackendName(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Sqlite, JobStatsTest, ::testing::ValuesIn(BackendsNamed("sqlite")), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, JobStatsTest, ::testing::ValuesIn(BackendsNamed("postgres")), BackendName);
INSTANTIATE_TEST_SUITE_P(Pgbouncer, JobStatsTest, ::testing::ValuesIn(BackendsNamed("pgbouncer")),
                         BackendName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JobStatsTest);

TEST_P(JobStatsTest, AnEmptyQueueHasEveryBucketAlignedToTheEpoch) {
  clock_.Advance(seconds(75) + milliseconds(250));  // t0 is 2026-01-01T00:00:00Z, a whole minute
  const JobStats stats = Stats();
  EXPECT_EQ(Show(stats.db_now), Show(t0() + seconds(75) + milliseconds(250)));
  EXPECT_EQ(Show(stats.to), Show(t0() + minutes(2)));    // the end of the bucket holding now
  EXPECT_EQ(Show(stats.from), Show(t0() - minutes(3)));  // five buckets back
  EXPECT_EQ(stats.bucket, minutes(1));
  ASSERT_EQ(stats.buckets.size(), 5u);
  for (std::size_t i = 0; i < stats.buckets.size(); ++i) {
    const JobStatsBucket& b = stats.buckets[i];
    EXPECT_EQ(Show(b.start), Show(t0() - minutes(3) + minutes(static_cast<int>(i))));
    EXPECT_EQ(b.succeeded, 0);
    EXPECT_EQ(b.frozen, 0);
    EXPECT_FALSE(b.avg_latency.has_value());
    EXPECT_FALSE(b.max_latency.has_value());
    EXPECT_FALSE(b.avg_run.has_value());
  }
  // A window that is not a whole number of buckets is rounded up to one.
  const JobStats odd = Stats({.window = seconds(150), .bucket = minutes(1)});
  EXPECT_EQ(odd.buckets.size(), 3u);
  EXPECT_EQ(Show(odd.from), Show(t0() - minutes(1)));
}

TEST_P(JobStatsTest, CountsFinishedJobsByCompletedAtWithLatenciesOfTheSucceeded) {
  // Minute 0: two successes (latency 2 s and 4 s, runs 3 s and 1 s).
  clock_.Advance(seconds(10));
  RunToSuccess(seconds(2), seconds(3));  // ends 00:00:15
  RunToSuccess(seconds(4), seconds(1));  // ends 00:00:20
  // Minute 1: one frozen by its failure, one cancelled while pending, one success on another queue and kind.
  Enqueue("default", "k", /*max_retries=*/0);
  clock_.Advance(seconds(1));
  const JobInfo doomed = ClaimOne();
  clock_.Advance(seconds(45));  // 00:01:06
  Complete(doomed, JobOutcome::kFail);
  const std::string cancelled = Enqueue();
  OCTOP_ASSERT_OK(jobs_->CancelJob({cancelled}));
  RunToSuccess(milliseconds(500), milliseconds(250), "other", "k2");  // ends 00:01:06.750
  // Not finished, so not counted: a failed attempt waiting for its retry, a running and a pending job.
  Enqueue("retrying");
  const JobInfo retrying = ClaimOne("retrying");
  Complete(retrying, JobOutcome::kFail);
  Enqueue("busy");
  ClaimOne("busy");
  Enqueue();

  const JobStats stats = Stats();
  ASSERT_EQ(stats.buckets.size(), 5u);  // [23:57, 00:02)
  const JobStatsBucket& m0 = stats.buckets[3];
  EXPECT_EQ(Show(m0.start), Show(t0()));
  EXPECT_EQ(m0.succeeded, 2);
  EXPECT_EQ(m0.frozen, 0);
  EXPECT_EQ(m0.avg_latency, seconds(3));
  EXPECT_EQ(m0.max_latency, seconds(4));
  EXPECT_EQ(m0.avg_run, seconds(2));
  const JobStatsBucket& m1 = stats.buckets[4];
  EXPECT_EQ(m1.succeeded, 1);
  EXPECT_EQ(m1.frozen, 2);
  EXPECT_EQ(m1.avg_latency, milliseconds(500));  // the frozen ones do not count in the latencies
  EXPECT_EQ(m1.max_latency, milliseconds(500));
  EXPECT_EQ(m1.avg_run, milliseconds(250));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(stats.buckets[i].succeeded + stats.buckets[i].frozen, 0);

  const JobStats other = Stats({.window = minutes(5), .bucket = minutes(1), .queue = "other"});
  EXPECT_EQ(other.buckets[3].succeeded, 0);
  EXPECT_EQ(other.buckets[4].succeeded, 1);
  EXPECT_EQ(other.buckets[4].frozen, 0);
  const JobStats k = Stats({.window = minutes(5), .bucket = minutes(1), .queue = "default", .kind = "k"});
  EXPECT_EQ(k.buckets[3].succeeded, 2);
  EXPECT_EQ(k.buckets[4].succeeded, 0);
  EXPECT_EQ(k.buckets[4].frozen, 2);
  EXPECT_FALSE(k.buckets[4].avg_latency.has_value());
  const JobStats none = Stats({.window = minutes(5), .bucket = minutes(1), .kind = "no-such-kind"});
  for (const JobStatsBucket& b : none.buckets) EXPECT_EQ(b.succeeded + b.frozen, 0);

  // Finer buckets split minute 0 at 00:00:15 and 00:00:20.
  const JobStats fine = Stats({.window = minutes(2), .bucket = seconds(5)});
  ASSERT_EQ(fine.buckets.size(), 24u);  // [23:59:10, 00:01:10)
  EXPECT_EQ(Show(fine.buckets[13].start), Show(t0() + seconds(15)));
  EXPECT_EQ(fine.buckets[12].succeeded, 0);
  EXPECT_EQ(fine.buckets[13].succeeded, 1);
  EXPECT_EQ(fine.buckets[14].succeeded, 1);
}

TEST_P(JobStatsTest, TheWindowIncludesItsStartAndDropsWhatIsOlder) {
  // A job that ends exactly on a bucket's start belongs to that bucket.
  clock_.Advance(seconds(58));
  RunToSuccess(seconds(1), seconds(1));  // ends 00:01:00.000
  JobStats stats = Stats({.window = minutes(2), .bucket = minutes(1)});
  ASSERT_EQ(stats.buckets.size(), 2u);
  EXPECT_EQ(Show(stats.buckets[1].start), Show(t0() + minutes(1)));
  EXPECT_EQ(stats.buckets[1].succeeded, 1);
  EXPECT_EQ(stats.buckets[0].succeeded, 0);

  // One minute later it is in the oldest bucket; one more and it has left the window.
  clock_.Advance(minutes(1));
  stats = Stats({.window = minutes(2), .bucket = minutes(1)});
  EXPECT_EQ(stats.buckets[0].succeeded, 1);
  EXPECT_EQ(stats.buckets[1].succeeded, 0);
  clock_.Advance(minutes(1));
  stats = Stats({.window = minutes(2), .bucket = minutes(1)});
  for (const JobStatsBucket& b : stats.buckets) EXPECT_EQ(b.succeeded, 0);
}

TEST_P(JobStatsTest, RejectsBadWindowsAndBuckets) {
  const auto code = [&](JobStatsFilter params) { return jobs_->ComputeJobStats(params).status().code(); };
  EXPECT_EQ(code({.window = minutes(1), .bucket = milliseconds(500)}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.window = minutes(1), .bucket = std::chrono::microseconds(1000500)}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.window = milliseconds(0), .bucket = seconds(1)}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.window = std::chrono::hours(24 * 8), .bucket = std::chrono::hours(1)}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.window = std::chrono::hours(1), .bucket = seconds(2)}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.window = std::chrono::hours(2), .bucket = seconds(5)}), StatusCode::kOk);  // 1440 buckets
  // Names no job can have find nothing rather than fail.
  auto stats = jobs_->ComputeJobStats({.queue = std::string("bad\xff"), .kind = std::string("x\0y", 3)});
  OCTOP_ASSERT_OK(stats);
  EXPECT_EQ(stats->buckets.size(), 60u);
}

}  // namespace
}  // namespace octop::store::testing
