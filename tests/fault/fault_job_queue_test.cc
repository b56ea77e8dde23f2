// Fault injection at the store seam for the job queue (docs/reliability.md): a FaultyJobStore under each
// JobQueue node drops the connection before the claim or completion statement, or after its COMMIT (an
// ambiguous commit), and fails the management calls. The invariants, as docs/jobs.md promises them: every job
// reaches a final status, none is lost, none runs twice at once, and delivery is at-least-once -- a job runs
// again only when its completion was never written (then after its expiry, by the rescuer). Time is a
// FakeClock (the database's now too); the completer's retry after a failed write waits on real time (1 s, by
// design).
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "faulty_store.h"
#include "job_test_env.h"

namespace octop::fault_testing {
namespace {

using namespace std::chrono_literals;
using job_testing::Eventually;

// Per job: how many times a handler ran it, and the most runs of it at one time (any node).
class JobRecord {
 public:
  void Enter(const std::string& id) {
    std::lock_guard lock(mu_);
    ++runs_[id];
    const int now = ++active_[id];
    if (now > max_active_) max_active_ = now;
  }
  void Leave(const std::string& id) {
    std::lock_guard lock(mu_);
    --active_[id];
  }
  int runs(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = runs_.find(id);
    return it == runs_.end() ? 0 : it->second;
  }
  int total() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [id, count] : runs_) n += count;
    return n;
  }
  int max_active() const {
    std::lock_guard lock(mu_);
    return max_active_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> runs_;
  std::map<std::string, int> active_;
  int max_active_ = 0;
};

// The worker slots of Node(): without prefetch a claim takes at most this many jobs.
constexpr int kNodeWorkers = 4;

class FaultJobQueueTest : public job_testing::JobQueueTestBase {
 protected:
  // This test's stores behind a FaultyJobStore driven by `plan`.
  runtime::JobStoreFactory FaultyStores(std::shared_ptr<FaultPlan> plan) {
    return
        [inner_factory = StoreFactory(), plan](const Clock& c) -> Result<std::unique_ptr<store::JobStore>> {
          OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<store::JobStore> inner, inner_factory(c));
          return std::unique_ptr<store::JobStore>(std::make_unique<FaultyJobStore>(std::move(inner), plan));
        };
  }

  // Options for a node on the fake clock, opened with FaultyStores.
  JobQueueOptions FaultyOptions() {
    JobQueueOptions o = Options(&fake_clock_);
    o.rescue_interval = 1s;
    o.rescue_grace = 0ms;
    o.config_refresh_interval = 1h;
    return o;
  }

  // A node that runs kind "job" on 4 workers; each run is recorded. The timeout is long because tests move
  // fake time much faster than real time: a short one would expire runs that are merely being written.
  JobQueue& Node(std::shared_ptr<FaultPlan> plan, JobRecord& record,
                 std::chrono::milliseconds timeout = std::chrono::hours(1)) {
    return Node(FaultyOptions(), std::move(plan), record, kNodeWorkers, timeout);
  }

  // The same, with the test's own options (FaultyOptions() changed) and number of workers.
  JobQueue& Node(const JobQueueOptions& options, std::shared_ptr<FaultPlan> plan, JobRecord& record,
                 int workers, std::chrono::milliseconds timeout = std::chrono::hours(1)) {
    JobQueue& q = Open(options, FaultyStores(std::move(plan)));
    EXPECT_TRUE(q.RegisterHandler("job",
                                  [&record](const JobContext& ctx) {
                                    record.Enter(ctx.id);
                                    record.Leave(ctx.id);
                                    return JobResult::Done();
                                  },
                                  {.timeout = timeout})
                    .ok());
    EXPECT_TRUE(q.AddWorkers("default", workers).ok());
    return q;
  }

  std::vector<std::string> EnqueueJobs(JobQueue& q, int n) {
    std::vector<JobSpec> specs(static_cast<std::size_t>(n), Spec("job"));
    auto enqueued = q.EnqueueMany(specs);
    EXPECT_TRUE(enqueued.ok()) << enqueued.status().ToString();
    std::vector<std::string> ids;
    if (enqueued.ok()) {
      for (const auto& e : *enqueued) ids.push_back(e.id);
    }
    return ids;
  }

  // Every job of `ids` is in a final status (success), read from the database.
  bool AllSucceeded(store::JobStore& db, const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      auto job = db.GetJob(id);
      if (!job.ok() || job->status != JobStatus::kSuccess) return false;
    }
    return true;
  }

  bool AdvanceUntil(const std::function<bool()>& condition, std::chrono::milliseconds step = 250ms) {
    return Eventually([&] {
      if (condition()) return true;
      fake_clock_.Advance(step);
      return false;
    });
  }

  std::shared_ptr<FaultPlan> plan_ = std::make_shared<FaultPlan>();
  JobRecord record_;
  JobRecord record_b_;
};

constexpr int kJobs = 12;
WallTime FakeStart() { return testing::FakeClock::DefaultStart(); }

TEST_P(FaultJobQueueTest, ClaimDroppedBeforeTheStatementLosesNothingAndRunsEachJobOnce) {
  JobQueue& q = Node(plan_, record_);
  store::JobStore& db = Direct(fake_clock_);
  plan_->FailNext(StoreOp::kClaimJobs, 3);
  ASSERT_TRUE(q.Start().ok());
  const auto ids = EnqueueJobs(q, kJobs);
  ASSERT_TRUE(AdvanceUntil([&] { return AllSucceeded(db, ids); })) << logs_.Dump();
  EXPECT_EQ(plan_->injected(StoreOp::kClaimJobs), 3);
  if (record_.total() != kJobs) {
    std::string rows;
    for (const auto& id : ids) {
      auto job = db.GetJob(id);
      if (!job.ok()) continue;
      rows += id + " attempt " + std::to_string(job->attempt) + " started " +
              std::to_string(job->started_at ? (*job->started_at - FakeStart()).count() : -1) + " expires " +
              std::to_string(job->expires_at ? (*job->expires_at - FakeStart()).count() : -1) + " created " +
              std::to_string((job->created_at - FakeStart()).count()) + "\n";
    }
    ADD_FAILURE() << rows << "now " << (fake_clock_.WallNow() - FakeStart()).count() << "\n" << logs_.Dump();
  }
  for (const auto& id : ids) {
    EXPECT_EQ(record_.runs(id), 1) << id;
    EXPECT_EQ(db.GetJob(id)->attempt, 1) << "a claim that never reached the database used no attempt";
  }
  EXPECT_EQ(record_.max_active(), 1);
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Failed to claim jobs of queue default"));
  std::printf("[ figures  ] claim dropped x3: %d jobs, %d runs, all success\n", kJobs, record_.total());
}

TEST_P(FaultJobQueueTest, AmbiguousClaimStrandsItsJobsUntilTheRescuerThenEachRunsOnce) {
  constexpr auto kTimeout = std::chrono::minutes(10);
  JobQueue& q = Node(plan_, record_, kTimeout);
  store::JobStore& db = Direct(fake_clock_);
  const auto ids = EnqueueJobs(q, kJobs);  // before Start: the first claim takes a full batch
  plan_->FailNext(StoreOp::kClaimJobs, 1, FaultKind::kAmbiguousCommit);
  ASSERT_TRUE(q.Start().ok());

  // The lost batch is running in the database with nobody running it; the rest of the jobs go ahead.
  std::set<std::string> stranded;
  auto find_stranded = [&] {
    stranded.clear();
    for (const auto& id : ids) {
      auto job = db.GetJob(id);
      if (job.ok() && job->status == JobStatus::kRunning && record_.runs(id) == 0) stranded.insert(id);
    }
    return !stranded.empty() && logs_.Contains(LogLevel::kWarn, "Failed to claim jobs of queue default");
  };
  // Settled: every job is either done (the later claims) or stranded (running, never handed to a handler).
  // The others' completions must be written before time jumps past every expiry, else they are rescued too.
  // A job of a later claim that is running but not yet in its handler looks stranded too, so settled also
  // means exactly the lost claim's full batch is left.
  ASSERT_TRUE(AdvanceUntil(
      [&] {
        if (!find_stranded() || stranded.size() != static_cast<std::size_t>(kNodeWorkers)) return false;
        for (const auto& id : ids) {
          auto job = db.GetJob(id);
          if (!stranded.count(id) && (!job.ok() || job->status != JobStatus::kSuccess)) return false;
        }
        return true;
      },
      20ms))
      << logs_.Dump();
  EXPECT_EQ(record_.total(), kJobs - static_cast<int>(stranded.size()));
  for (const auto& id : stranded) EXPECT_EQ(db.GetJob(id)->attempt, 1);

  // Before their expiry nothing touches them; after it the rescuer counts the lost attempt and each runs
  // again, once.
  fake_clock_.Advance(kTimeout - std::chrono::seconds(5));
  EXPECT_TRUE(find_stranded());
  fake_clock_.Advance(std::chrono::seconds(10));
  ASSERT_TRUE(AdvanceUntil([&] { return AllSucceeded(db, ids); }, 20ms)) << logs_.Dump();
  for (const auto& id : ids) {
    EXPECT_EQ(record_.runs(id), 1) << id;
    EXPECT_EQ(db.GetJob(id)->attempt, stranded.count(id) ? 2 : 1) << id;
  }
  EXPECT_EQ(record_.max_active(), 1);
  std::printf(
      "[ figures  ] ambiguous claim: %zu of %d jobs stranded until their expiry, then rescued; %d runs\n",
      stranded.size(), kJobs, record_.total());
}

TEST_P(FaultJobQueueTest, CompletionDroppedBeforeTheStatementIsRetriedAndNothingRunsTwice) {
  JobQueue& q = Node(plan_, record_);
  store::JobStore& db = Direct(fake_clock_);
  plan_->FailNext(StoreOp::kCompleteJobs, 2);
  ASSERT_TRUE(q.Start().ok());
  const auto ids = EnqueueJobs(q, kJobs);
  ASSERT_TRUE(Eventually([&] { return AllSucceeded(db, ids); })) << logs_.Dump();
  EXPECT_EQ(plan_->injected(StoreOp::kCompleteJobs), 2);
  for (const auto& id : ids) {
    EXPECT_EQ(record_.runs(id), 1) << id;
    EXPECT_EQ(db.GetJob(id)->attempt, 1);
  }
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Failed to record"));
}

TEST_P(FaultJobQueueTest, AmbiguousCompletionIsFencedOnRetryAndDoesNotReRun) {
  JobQueue& q = Node(plan_, record_);
  store::JobStore& db = Direct(fake_clock_);
  plan_->FailNext(StoreOp::kCompleteJobs, 1, FaultKind::kAmbiguousCommit);
  ASSERT_TRUE(q.Start().ok());
  const auto ids = EnqueueJobs(q, kJobs);
  ASSERT_TRUE(Eventually([&] { return AllSucceeded(db, ids); })) << logs_.Dump();
  ASSERT_TRUE(Eventually([&] { return plan_->calls(StoreOp::kCompleteJobs) >= 2; }));
  // The retried batch finds its jobs already final: its items are discarded as no longer owned.
  ASSERT_TRUE(Eventually([&] { return logs_.Contains(LogLevel::kInfo, "no longer owned by this node"); }));
  for (const auto& id : ids) {
    EXPECT_EQ(record_.runs(id), 1) << id;
    EXPECT_EQ(db.GetJob(id)->attempt, 1);
  }
}

TEST_P(FaultJobQueueTest, CompletionsNeverWrittenAreRescuedAndRunAgainElsewhereAtLeastOnce) {
  auto broken = std::make_shared<FaultPlan>();
  broken->FailForever(StoreOp::kCompleteJobs);
  JobQueueOptions options_a = FaultyOptions();
  options_a.rescue_interval = 0ms;
  options_a.shutdown_grace = 0ms;
  JobQueue& a = Open(options_a, FaultyStores(broken));
  ASSERT_TRUE(a.RegisterHandler("job",
                                [this](const JobContext& ctx) {
                                  record_.Enter(ctx.id);
                                  record_.Leave(ctx.id);
                                  return JobResult::Done();
                                },
                                {.timeout = 2min})
                  .ok());
  ASSERT_TRUE(a.AddWorkers("default", 4).ok());
  ASSERT_TRUE(a.Start().ok());
  store::JobStore& db = Direct(fake_clock_);
  const auto ids = EnqueueJobs(a, 4);
  ASSERT_TRUE(Eventually([&] { return record_.total() == 4; }));
  a.Shutdown();  // gives up on the unwritable completions: the jobs stay running in the database
  EXPECT_TRUE(logs_.Contains(LogLevel::kError, "Giving up on"));
  for (const auto& id : ids) EXPECT_EQ(db.GetJob(id)->status, JobStatus::kRunning);

  JobQueue& b = Node(plan_, record_b_);
  ASSERT_TRUE(b.Start().ok());
  fake_clock_.Advance(std::chrono::minutes(2) + std::chrono::seconds(1));  // past A's expiry
  ASSERT_TRUE(AdvanceUntil([&] { return AllSucceeded(db, ids); }, 20ms)) << logs_.Dump();
  for (const auto& id : ids) {
    EXPECT_EQ(record_.runs(id), 1);
    EXPECT_EQ(record_b_.runs(id), 1) << "at-least-once: the unrecorded run is repeated once";
    EXPECT_EQ(db.GetJob(id)->attempt, 2);
  }
  EXPECT_EQ(record_b_.max_active(), 1);
}

TEST_P(FaultJobQueueTest, ManagementCallsReturnAClearStatusWhenTheStoreFailsAndWriteNothing) {
  JobQueue& q = Node(plan_, record_);
  store::JobStore& db = Direct(fake_clock_);

  plan_->FailNext(StoreOp::kEnqueueJobs, 1);
  auto enqueued = q.Enqueue(Spec("job"));
  EXPECT_EQ(enqueued.status().code(), StatusCode::kUnavailable) << enqueued.status().ToString();
  auto listed = db.ListJobs({});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << "a failed enqueue wrote nothing";

  auto kept = q.Enqueue(Spec("job"));  // not started: stays pending
  ASSERT_TRUE(kept.ok());
  plan_->FailNext(StoreOp::kCancelJob, 1);
  Status cancel = q.CancelJob(kept->id);
  EXPECT_EQ(cancel.code(), StatusCode::kUnavailable) << cancel.ToString();
  EXPECT_EQ(db.GetJob(kept->id)->status, JobStatus::kPending);

  plan_->FailNext(StoreOp::kGetJob, 1);
  EXPECT_EQ(q.GetJob(kept->id).status().code(), StatusCode::kUnavailable);
  plan_->FailNext(StoreOp::kListJobs, 1);
  EXPECT_EQ(q.ListJobs({}).status().code(), StatusCode::kUnavailable);
  plan_->FailNext(StoreOp::kSummarizeJobs, 1);
  EXPECT_EQ(q.Summarize().status().code(), StatusCode::kUnavailable);

  ASSERT_TRUE(q.CancelJob(kept->id).ok());
  plan_->FailNext(StoreOp::kRetryJob, 1);
  EXPECT_EQ(q.RetryJob(kept->id).code(), StatusCode::kUnavailable);
  EXPECT_EQ(db.GetJob(kept->id)->status, JobStatus::kFrozen);
}

// JobQueueOptions::wake_claim_interval: a stream of enqueues (each one a wake-up) is claimed a few jobs at a
// time, at most about one wake-up claim per interval, not one claim per job. The fake clock stands still, so
// there are no polls: every ClaimJobs call counted here was started by a wake-up, or is the immediate
// re-claim after a claim during which a job became due (at most one per wake-up claim).
TEST_P(FaultJobQueueTest, WakeUpsWithinTheIntervalShareOneClaim) {
  JobQueueOptions options = FaultyOptions();
  options.wake_claim_interval = std::chrono::milliseconds(100);
  options.prefetch = 100;  // no claim fills its limit (a full claim is followed by another at once)
  JobQueue& q = Node(options, plan_, record_, 4);
  ASSERT_TRUE(q.Start().ok());
  store::JobStore& db = Direct(fake_clock_);
  const std::vector<std::string> first = EnqueueJobs(q, 1);
  ASSERT_TRUE(Eventually([&] { return AllSucceeded(db, first); })) << logs_.Dump();
  const long claims_before = plan_->calls(StoreOp::kClaimJobs);

  constexpr int kStream = 30;
  std::vector<std::string> ids;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kStream; ++i) {
    auto one = q.Enqueue(Spec("job"));
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    ids.push_back(one->id);
  }
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(Eventually([&] { return AllSucceeded(db, ids); })) << logs_.Dump();
  const long claims = plan_->calls(StoreOp::kClaimJobs) - claims_before;
  // Wake-ups keep arriving until the last NOTIFY is delivered, which on a loaded machine is well after the
  // last enqueue returned: the windows are counted over the whole time the claims could happen in (until the
  // last job ran), since what is promised is one wake-started claim per interval, not a number of claims.
  const auto span = std::chrono::steady_clock::now() - t0;
  const long windows = 1 + static_cast<long>(span / std::chrono::milliseconds(100));
  EXPECT_LE(claims, 2 * windows + 1) << kStream << " enqueues in "
                                     << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                                     << " ms";
  for (const std::string& id : ids) EXPECT_EQ(record_.runs(id), 1) << id;
  std::printf("[ figures  ] %d enqueues in %lld ms: %ld claims\n", kStream,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()),
              claims);
}

TEST_P(FaultJobQueueTest, AWakeClaimIntervalOutsideZeroTo100MsIsRejected) {
  JobQueueOptions options = FaultyOptions();
  options.wake_claim_interval = std::chrono::milliseconds(101);
  auto opened = runtime::JobQueueOpener::Open(options, FaultyStores(plan_));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("wake_claim_interval must be between 0 and 100 ms"),
            std::string::npos)
      << opened.status().ToString();
  options.wake_claim_interval = std::chrono::microseconds(-1);
  EXPECT_FALSE(JobQueue::Open(options).ok());
}

// On PostgreSQL a plain SQL UPDATE of jobs notifies every node, which reconciles its working sets
// (docs/jobs.md "Jobs written by SQL"). A pass reads every job, so the passes notifications ask for are
// spaced by at least a second: a DBA's script of ten statements costs a pass or two, not ten. Fake time
// stands still while the script runs and then moves in steps of 250 ms until the job the script made due has
// run.
TEST_P(FaultJobQueueTest, AScriptOfSqlUpdatesCostsAFewReconcilePassesNotOneEach) {
  if (!backend().is_postgres())
    GTEST_SKIP() << "SQLite's claims read octop_jobs: there is nothing to reconcile";
  JobQueueOptions options = FaultyOptions();
  // No periodic pass: only the one a second after the start and those notifications ask for.
  options.reconcile_interval = 0ms;
  JobQueue& q = Node(options, plan_, record_, 1);
  ASSERT_TRUE(q.Start().ok());
  JobSpec tomorrow = Spec("job");
  tomorrow.scheduled_at = FakeStart() + std::chrono::hours(24);
  auto job = q.Enqueue(tomorrow);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(AdvanceUntil([&] { return plan_->calls(StoreOp::kReconcileJobSets) >= 1; }))
      << "no pass after the start\n"
      << logs_.Dump();
  const long passes_before = plan_->calls(StoreOp::kReconcileJobSets);

  auto sql = [&](const std::string& statement, std::vector<std::optional<std::string>> params) {
    return q.WithTransaction(
        [&](Transaction& tx) -> Status { return tx.Execute(statement, params).status(); });
  };
  for (int i = 1; i <= 9; ++i) {
    ASSERT_TRUE(sql("UPDATE octop_jobs SET priority = $2 WHERE id = $1", {job->id, std::to_string(i)}).ok());
  }
  ASSERT_TRUE(
      sql("UPDATE octop_jobs SET scheduled_at = '2000-01-01 00:00:00+00' WHERE id = $1", {job->id}).ok());
  ASSERT_TRUE(AdvanceUntil([&] { return record_.runs(job->id) == 1; }))
      << "the job the script made due never ran\n"
      << logs_.Dump();
  const long passes = plan_->calls(StoreOp::kReconcileJobSets) - passes_before;
  EXPECT_GE(passes, 1);
  EXPECT_LE(passes, 3) << "ten statements of a script, " << passes << " reconcile passes";
}

// A starting node claims before it sweeps (docs/jobs.md "Maintenance"): the rescuer runs at once, the
// retention and reconcile passes, which read many rows, only once a second has passed.
TEST_P(FaultJobQueueTest, ANodeClaimsBeforeItsFirstRetentionAndReconcilePasses) {
  JobQueue& q = Node(plan_, record_);
  store::JobStore& db = Direct(fake_clock_);
  ASSERT_TRUE(q.Start().ok());
  const auto ids = EnqueueJobs(q, kJobs);
  // Fake time stands still: the jobs run and the first rescue sweeps, the other passes wait.
  ASSERT_TRUE(Eventually([&] {
    return AllSucceeded(db, ids) && plan_->calls(StoreOp::kRescueExpiredJobs) >= 1;
  })) << logs_.Dump();
  EXPECT_EQ(plan_->calls(StoreOp::kDeleteFinishedJobs), 0);
  EXPECT_EQ(plan_->calls(StoreOp::kReconcileJobSets), 0);
  ASSERT_TRUE(AdvanceUntil([&] {
    return plan_->calls(StoreOp::kDeleteFinishedJobs) >= 1 && plan_->calls(StoreOp::kReconcileJobSets) >= 1;
  })) << logs_.Dump();
  EXPECT_GE(fake_clock_.WallNow() - FakeStart(), 1s);
}

// The runtime's retention sweep (JobQueueOptions::retention): a job finished longer ago than the retention is
// deleted by the next sweep; a waiting job, however old, stays.
TEST_P(FaultJobQueueTest, TheRetentionSweepDeletesJobsFinishedLongerAgoThanTheRetentionOnly) {
  JobQueueOptions options = FaultyOptions();
  options.retention = std::chrono::hours(1);
  options.retention_interval = 1s;
  JobQueue& q = Node(options, plan_, record_, 1);
  store::JobStore& db = Direct(fake_clock_);
  ASSERT_TRUE(q.Start().ok());
  const auto finished = EnqueueJobs(q, 1);
  JobSpec later = Spec("job");
  later.scheduled_at = FakeStart() + std::chrono::hours(48);
  auto waiting = q.Enqueue(later);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  ASSERT_TRUE(Eventually([&] { return AllSucceeded(db, finished); })) << logs_.Dump();
  // Two sweeps a second apart while the job is younger than the retention: it stays.
  const long sweeps = plan_->calls(StoreOp::kDeleteFinishedJobs);
  ASSERT_TRUE(AdvanceUntil([&] { return plan_->calls(StoreOp::kDeleteFinishedJobs) >= sweeps + 2; }))
      << logs_.Dump();
  EXPECT_TRUE(db.GetJob(finished[0]).ok());
  fake_clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(AdvanceUntil([&] { return db.GetJob(finished[0]).status().code() == StatusCode::kNotFound; }))
      << logs_.Dump();
  EXPECT_TRUE(db.GetJob(waiting->id).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultJobQueueTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         job_testing::BackendName);

}  // namespace
}  // namespace octop::fault_testing
