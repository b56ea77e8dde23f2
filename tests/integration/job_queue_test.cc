// The JobQueue runtime on every store backend, in one process: running handlers, results, retries with their
// backoff and the freeze (driven by a FakeClock), timeouts, unique keys under concurrency, batch and
// transactional enqueue, pause/resume, manual retry/cancel, the rescuer and fencing, config changes without a
// restart, shutdown draining, metrics.
#include <atomic>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <prometheus/registry.h>

#include "job_test_env.h"

namespace octop::job_testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class JobQueueTest : public JobQueueTestBase {
 protected:
  // The "blocking" handler: waits for gate_ (done) or its stop_token (then sets flag_ and fails), with one
  // worker on the default queue.
  void AddBlockingWorker(JobQueue& q) {
    EXPECT_TRUE(q.RegisterHandler("blocking", [&](const JobContext& ctx) {
                   calls_.Add(ctx);
                   if (gate_.Wait(ctx.stop_token)) return JobResult::Done();
                   flag_ = true;
                   return JobResult::Fail("stopped");
                 }).ok());
    EXPECT_TRUE(q.AddWorkers("default", 1).ok());
  }
  // Opens and starts a node with AddBlockingWorker, and enqueues a job it is running on return; *id is that
  // job's id.
  JobQueue& RunBlockingJob(JobQueueOptions options, std::string* id) {
    JobQueue& q = Open(std::move(options));
    AddBlockingWorker(q);
    EXPECT_TRUE(q.Start().ok());
    auto enqueued = q.Enqueue(Spec("blocking"));
    EXPECT_TRUE(enqueued.ok());
    if (enqueued.ok()) *id = enqueued->id;
    EXPECT_TRUE(calls_.WaitFor(1));
    return q;
  }
};

double MetricValue(JobQueue& q, const std::string& name, const std::map<std::string, std::string>& labels) {
  double total = 0;
  for (const auto& family : q.metrics_registry()->Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      bool match = true;
      for (const auto& [k, v] : labels) {
        bool found = false;
        for (const auto& l : m.label) found = found || (l.name == k && l.value == v);
        match = match && found;
      }
      if (!match) continue;
      total += family.type == prometheus::MetricType::Histogram
                   ? static_cast<double>(m.histogram.sample_count)
                   : m.counter.value + m.gauge.value;
    }
  }
  return total;
}

TEST_P(JobQueueTest, RunsAHandlerWithItsContextAndRecordsSuccess) {
  JobQueue& q = Open(Options(&Clock::Real()));
  ASSERT_TRUE(q.RegisterHandler("greet", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 2).ok());
  ASSERT_TRUE(q.Start().ok());

  JobSpec spec = Spec("greet", R"({"name":"Ada","n":[1,2]})");
  spec.max_retries = 5;
  auto enqueued = q.Enqueue(spec);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  EXPECT_FALSE(enqueued->existing);
  ASSERT_TRUE(calls_.WaitFor(1));
  const auto call = calls_.calls().front();
  EXPECT_EQ(call.id, enqueued->id);
  EXPECT_EQ(call.kind, "greet");
  EXPECT_EQ(call.queue, "default");
  EXPECT_EQ(Json::parse(call.payload), Json::parse(R"({"name":"Ada","n":[1,2]})"));
  EXPECT_EQ(call.attempt, 1);
  EXPECT_EQ(call.max_retries, 5);
  ASSERT_TRUE(WaitForJob(q, enqueued->id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  auto job = q.GetJob(enqueued->id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->attempt, 1);
  EXPECT_TRUE(job->completed_at.has_value());
  EXPECT_FALSE(job->last_error.has_value());
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(q, "octop_jobs_completed_total", {{"kind", "greet"}, {"result", "success"}}) == 1;
  }));
  EXPECT_EQ(MetricValue(q, "octop_jobs_enqueued_total", {{"kind", "greet"}}), 1);
  EXPECT_EQ(MetricValue(q, "octop_jobs_start_latency_seconds", {{"queue", "default"}}), 1);
}

TEST_P(JobQueueTest, ClaimsAreTimedAndCountTheJobsTheyBring) {
  JobQueue& q = Open(Options(&Clock::Real()));
  ASSERT_TRUE(q.RegisterHandler("count", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.EnqueueMany(std::vector<JobSpec>(7, Spec("count"))).ok());
  ASSERT_TRUE(q.AddWorkers("default", 2).ok());
  ASSERT_TRUE(q.Start().ok());
  ASSERT_TRUE(calls_.WaitFor(7));
  ASSERT_TRUE(q.Enqueue(Spec("count")).ok());  // a second claim, after the first was drained
  ASSERT_TRUE(calls_.WaitFor(8));
  EXPECT_EQ(MetricValue(q, "octop_jobs_claimed_total", {{"queue", "default"}}), 8);
  double claims = 0;
  double seconds = 0;
  for (const auto& family : q.metrics_registry()->Collect()) {
    if (family.name != "octop_jobs_claim_duration_seconds") continue;
    for (const auto& m : family.metric) {
      claims += static_cast<double>(m.histogram.sample_count);
      seconds += m.histogram.sample_sum;
    }
  }
  EXPECT_GE(claims, 2);  // one for the first seven, one for the eighth (empty polls count too)
  EXPECT_GT(seconds, 0);
}

TEST_P(JobQueueTest, AnIdleWorkerStartsAnEnqueuedJobQuickly) {
  // A loose behavioural bound only (a wake-up, not a poll): the real figures are measured in bench/.
  auto options = Options(&Clock::Real());
  options.default_poll_interval = 60s;  // a poll cannot be what starts the job
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("ping", [&](const JobContext&) {
                 {
                   std::lock_guard lock(mu_);
                   started_ = std::chrono::steady_clock::now();
                 }
                 cv_.notify_all();
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  for (int i = 0; i < 20; ++i) {
    {
      std::lock_guard lock(mu_);
      started_.reset();
    }
    const auto before = std::chrono::steady_clock::now();
    ASSERT_TRUE(q.Enqueue(Spec("ping")).ok());
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, 10s, [&] { return started_.has_value(); }))
        << "job " << i << " never started";
    EXPECT_LT(*started_ - before, 500ms) << "job " << i;
  }
}

TEST_P(JobQueueTest, AClaimStartsItsJobsOnEveryIdleWorker) {
  // The jobs block until the gate opens, so all eight run at once only if a claim of eight reaches all eight
  // idle workers (each worker that takes a job wakes the next while jobs are left: docs/jobs.md "Claims in
  // batches").
  auto options = Options(&Clock::Real());
  options.prefetch = 0;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("block", GatedHandler()).ok());
  ASSERT_TRUE(q.AddWorkers("default", 8).ok());
  auto ids = q.EnqueueMany(std::vector<JobSpec>(8, Spec("block")));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_TRUE(q.Start().ok());
  EXPECT_TRUE(calls_.WaitFor(8)) << calls_.size() << " of 8 started";
  gate_.Open();
  for (const EnqueueResult& r : *ids) {
    ASSERT_TRUE(WaitForJob(q, r.id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }))
        << r.id;
  }
}

TEST_P(JobQueueTest, EveryClaimReachesEveryIdleWorkerRoundAfterRound) {
  // Each job waits until all six of its round have started: a round finishes only if its claim reached all
  // six idle workers. Twenty rounds, each from all workers idle, so the bookkeeping of which worker is being
  // woken must come back to rest after every claim (a stale one would leave the next round's jobs unstarted).
  constexpr int kWorkers = 6;
  constexpr int kRounds = 20;
  auto options = Options(&Clock::Real());
  options.prefetch = 0;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("round", [&](const JobContext&) {
                 std::unique_lock lock(mu_);
                 const int started = ++counter_;
                 const int round_end = (started + kWorkers - 1) / kWorkers * kWorkers;
                 cv_.notify_all();
                 if (!cv_.wait_for(lock, 10s, [&] { return counter_.load() >= round_end; })) flag_ = true;
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", kWorkers).ok());
  ASSERT_TRUE(q.Start().ok());
  for (int round = 1; round <= kRounds; ++round) {
    ASSERT_TRUE(q.EnqueueMany(std::vector<JobSpec>(kWorkers, Spec("round"))).ok());
    ASSERT_TRUE(Eventually([&] {
      return MetricValue(q, "octop_jobs_completed_total", {{"result", "success"}}) == round * kWorkers;
    })) << "round "
        << round;
    ASSERT_FALSE(flag_.load()) << "a job of round " << round << " waited 10 s for the others to start";
  }
}

TEST_P(JobQueueTest, FailedAttemptsBackOffExponentiallyThenFreeze) {
  testing::FakeClock& clock = fake_clock_;
  auto options = Options(&clock);
  options.retry.base = 1s;
  options.retry.cap = 1h;
  options.retry.jitter = 0;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("flaky", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Fail("boom " + std::to_string(ctx.attempt));
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  JobSpec spec = Spec("flaky");
  spec.max_retries = 2;
  auto id = q.Enqueue(spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_TRUE(calls_.WaitFor(static_cast<std::size_t>(attempt)));
    const WallTime failed_at = clock.WallNow();  // fake time stands still while the handler runs
    ASSERT_TRUE(WaitForJob(q, id->id, [&](const JobInfo& j) {
      return j.status == JobStatus::kFailed && j.attempt == attempt;
    })) << logs_.Dump();
    auto job = q.GetJob(id->id);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->last_error, "boom " + std::to_string(attempt));
    // delay = base * 2^(attempt-1), no jitter: 1 s, then 2 s.
    const auto expected_due = failed_at + std::chrono::seconds(1 << (attempt - 1));
    EXPECT_LE(std::chrono::abs(job->scheduled_at - expected_due), 1ms);
    // Fake time moves to the due instant and no further: the database cannot hand the job out earlier, and it
    // must be handed out at that instant (the producer sleeps until the next due job).
    clock.Advance(std::chrono::duration_cast<std::chrono::nanoseconds>(job->scheduled_at - clock.WallNow()));
    ASSERT_TRUE(calls_.WaitFor(static_cast<std::size_t>(attempt) + 1)) << logs_.Dump();
    auto next = q.GetJob(id->id);
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(next->started_at.has_value());
    EXPECT_LE(std::chrono::abs(*next->started_at - job->scheduled_at), 1ms);
  }
  ASSERT_TRUE(WaitForJob(q, id->id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }));
  auto frozen = q.GetJob(id->id);
  ASSERT_TRUE(frozen.ok());
  EXPECT_EQ(frozen->attempt, 3);  // 1 + max_retries
  EXPECT_EQ(frozen->last_error, "boom 3");
  EXPECT_TRUE(frozen->completed_at.has_value());
  EXPECT_EQ(calls_.size(), 3u);
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(q, "octop_jobs_completed_total", {{"kind", "flaky"}, {"result", "frozen"}}) == 1;
  }));
}

TEST_P(JobQueueTest, RetryAfterAndExceptionsAndCancelResults) {
  testing::FakeClock& clock = fake_clock_;
  JobQueue& q = Open(Options(&clock));
  ASSERT_TRUE(q.RegisterHandler("later", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 if (ctx.attempt == 1) return JobResult::Retry(30s, "not yet");
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.RegisterHandler("parks", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Retry(std::chrono::hours(10000), "come back in a year");
               }).ok());
  ASSERT_TRUE(q.RegisterHandler("throws", [](const JobContext&) -> JobResult {
                 throw std::runtime_error("disk on fire");
               }).ok());
  ASSERT_TRUE(
      q.RegisterHandler("gives-up", [](const JobContext&) { return JobResult::Cancel("bad payload"); }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 2).ok());
  ASSERT_TRUE(q.Start().ok());

  auto later = q.Enqueue(Spec("later"));
  JobSpec throws = Spec("throws");
  throws.max_retries = 0;
  auto thrown = q.Enqueue(throws);
  auto gives_up = q.Enqueue(Spec("gives-up"));
  auto parks = q.Enqueue(Spec("parks"));
  ASSERT_TRUE(later.ok() && thrown.ok() && gives_up.ok() && parks.ok());

  ASSERT_TRUE(WaitForJob(q, thrown->id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }));
  EXPECT_EQ(q.GetJob(thrown->id)->last_error, "disk on fire");
  ASSERT_TRUE(WaitForJob(q, gives_up->id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }));
  EXPECT_EQ(q.GetJob(gives_up->id)->attempt, 1);  // retries were left, but the handler gave up
  EXPECT_EQ(q.GetJob(gives_up->id)->last_error, "bad payload");

  const WallTime t0 = clock.WallNow();
  ASSERT_TRUE(WaitForJob(q, later->id, [](const JobInfo& j) { return j.status == JobStatus::kFailed; }));
  auto waiting = q.GetJob(later->id);
  EXPECT_LE(std::chrono::abs(waiting->scheduled_at - (t0 + 30s)), 1ms);  // Retry(after) overrides the backoff
  EXPECT_EQ(waiting->last_error, "not yet");
  // A delay beyond kMaxJobRetryAfter waits that long, not a year.
  ASSERT_TRUE(WaitForJob(q, parks->id, [](const JobInfo& j) { return j.status == JobStatus::kFailed; }));
  EXPECT_LE(std::chrono::abs(q.GetJob(parks->id)->scheduled_at - (t0 + kMaxJobRetryAfter)), 1ms);
  clock.Advance(30s);
  ASSERT_TRUE(WaitForJob(q, later->id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  EXPECT_EQ(calls_.size(), 3u);
}

TEST_P(JobQueueTest, ATimeoutFiresTheStopTokenAndCountsAsAFailedAttempt) {
  testing::FakeClock& clock = fake_clock_;
  JobQueue& q = Open(Options(&clock));
  ASSERT_TRUE(q.RegisterHandler("slow",
                                [&](const JobContext& ctx) {
                                  calls_.Add(ctx);
                                  Gate never;
                                  if (!never.Wait(ctx.stop_token)) flag_ = true;
                                  return JobResult::Fail("interrupted");
                                },
                                {.timeout = 10s})
                  .ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  auto id = q.Enqueue(Spec("slow"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(calls_.WaitFor(1));
  clock.Advance(9s);
  EXPECT_FALSE(flag_.load());
  // The producer fires the stop at the deadline: advance to it in steps (the producer may not be asleep yet),
  // then wait without moving the clock further. Advancing past it while a slow (TSan) handler thread wakes
  // let the rescuer take the job back as lost before its completion landed ("worker lost").
  auto advanced = 0ms;
  ASSERT_TRUE(Eventually([&] {
    if (advanced < 1s) {
      clock.Advance(100ms);
      advanced += 100ms;
    }
    return flag_.load();
  }));
  ASSERT_TRUE(WaitForJob(q, id->id, [](const JobInfo& j) { return j.status == JobStatus::kFailed; }));
  EXPECT_EQ(q.GetJob(id->id)->last_error, "Job timed out after 10000 ms: interrupted");
}

TEST_P(JobQueueTest, ConcurrentEnqueuesOfOneUniqueKeyMakeOneJob) {
  JobQueue& q = Open(Options(&Clock::Real()));
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<Result<EnqueueResult>> results(kThreads, InternalError("not run"));
  std::atomic<bool> go{false};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      JobSpec spec = Spec("report", R"({"n":)" + std::to_string(i) + "}");
      spec.unique_key = "daily-report";
      results[static_cast<std::size_t>(i)] = q.Enqueue(spec);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  std::set<std::string> ids;
  int created = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ids.insert(r->id);
    if (!r->existing) ++created;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(ids.size(), 1u);
  auto all = q.ListJobs({.status = std::nullopt, .queue = std::nullopt, .kind = "report", .limit = 100});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);

  // Once the job has finished the key is free again.
  ASSERT_TRUE(q.RegisterHandler("report", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  ASSERT_TRUE(WaitForJob(q, *ids.begin(), [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  JobSpec again = Spec("report");
  again.unique_key = "daily-report";
  auto second = q.Enqueue(again);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->existing);
  EXPECT_NE(second->id, *ids.begin());
}

TEST_P(JobQueueTest, EnqueueManyIsAllOrNothing) {
  JobQueue& q = Open(Options(&Clock::Real()));
  std::vector<JobSpec> specs;
  for (int i = 0; i < 50; ++i) specs.push_back(Spec("batch", R"({"i":)" + std::to_string(i) + "}"));
  auto bad = specs;
  bad[25].payload = "{not json";
  EXPECT_EQ(q.EnqueueMany(bad).status().code(), StatusCode::kInvalidArgument);
  auto none = q.ListJobs({.status = std::nullopt, .queue = std::nullopt, .kind = "batch", .limit = 100});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  ASSERT_TRUE(q.RegisterHandler("batch", [&](const JobContext&) {
                 ++counter_;
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 4).ok());
  ASSERT_TRUE(q.Start().ok());
  auto ok = q.EnqueueMany(specs);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 50u);
  std::set<std::string> ids;
  for (const auto& r : *ok) ids.insert(r.id);
  EXPECT_EQ(ids.size(), 50u);
  ASSERT_TRUE(Eventually([&] {
    auto done =
        q.ListJobs({.status = JobStatus::kSuccess, .queue = std::nullopt, .kind = "batch", .limit = 100});
    return done.ok() && done->size() == 50;
  }));
  EXPECT_EQ(counter_.load(), 50);
}

TEST_P(JobQueueTest, TransactionalEnqueueCommitsOrRollsBackWithTheCallersWrites) {
  JobQueue& q = Open(Options(&Clock::Real()));
  ASSERT_TRUE(q.RegisterHandler("welcome", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  ASSERT_TRUE(q.WithTransaction([](Transaction& tx) -> Status {
                 return tx.Execute("CREATE TABLE app_users (name text)", {}).status();
               }).ok());

  std::string rolled_back_id;
  Status s = q.WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.Execute("INSERT INTO app_users (name) VALUES ($1)", {"eve"}).status());
    OCTOP_ASSIGN_OR_RETURN(EnqueueResult r, q.EnqueueTx(tx, Spec("welcome", R"({"user":"eve"})")));
    rolled_back_id = r.id;
    return InvalidArgumentError("signup refused");
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.GetJob(rolled_back_id).status().code(), StatusCode::kNotFound);

  std::string committed_id;
  s = q.WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.Execute("INSERT INTO app_users (name) VALUES ($1)", {"ada"}).status());
    OCTOP_ASSIGN_OR_RETURN(EnqueueResult r, q.EnqueueTx(tx, Spec("welcome", R"({"user":"ada"})")));
    committed_id = r.id;
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  // No WakeAll(): the notification sent at commit wakes the worker.
  ASSERT_TRUE(calls_.WaitFor(1));
  EXPECT_EQ(calls_.calls().front().id, committed_id);
  ASSERT_TRUE(WaitForJob(q, committed_id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_P(JobQueueTest, APausedQueueKeepsItsJobsUntilResumed) {
  JobQueue& q = Open(Options(&Clock::Real()));
  ASSERT_TRUE(q.RegisterHandler("mail", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("outbox", 1).ok());
  ASSERT_TRUE(q.PauseQueue("outbox").ok());
  ASSERT_TRUE(q.Start().ok());
  JobSpec spec = Spec("mail");
  spec.queue = "outbox";
  auto id = q.Enqueue(spec);
  ASSERT_TRUE(id.ok());
  auto summary = q.Summarize();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->paused_queues, std::vector<std::string>{"outbox"});
  // The enqueue woke the worker; a claim on a paused queue takes nothing.
  EXPECT_EQ(q.GetJob(id->id)->status, JobStatus::kPending);
  ASSERT_TRUE(q.ResumeQueue("outbox").ok());
  ASSERT_TRUE(WaitForJob(q, id->id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  EXPECT_EQ(calls_.size(), 1u);
  EXPECT_TRUE(q.Summarize()->paused_queues.empty());
}

TEST_P(JobQueueTest, ManualCancelAndRetry) {
  JobQueue& q = Open(Options(&Clock::Real()));
  AddBlockingWorker(q);
  ASSERT_FALSE(HasFailure());

  // Pending (not started): cancelled in the database.
  auto pending = q.Enqueue(Spec("blocking"));
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(q.CancelJob(pending->id).ok());
  auto cancelled = q.GetJob(pending->id);
  EXPECT_EQ(cancelled->status, JobStatus::kFrozen);
  EXPECT_EQ(cancelled->last_error, "Job was cancelled");
  EXPECT_EQ(q.CancelJob(pending->id).code(), StatusCode::kConflict);
  EXPECT_EQ(q.CancelJob("00000000-0000-4000-8000-000000000000").code(), StatusCode::kNotFound);

  // Running here: its stop_token fires and the attempt ends frozen with the cancel error.
  ASSERT_TRUE(q.Start().ok());
  auto running = q.Enqueue(Spec("blocking"));
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(calls_.WaitFor(1));
  ASSERT_TRUE(q.CancelJob(running->id).ok());
  ASSERT_TRUE(WaitForJob(q, running->id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }));
  EXPECT_TRUE(flag_.load());
  EXPECT_EQ(q.GetJob(running->id)->last_error, "Job was cancelled");

  // Retry: a frozen job runs again.
  EXPECT_EQ(q.RetryJob("00000000-0000-4000-8000-000000000000").code(), StatusCode::kNotFound);
  gate_.Open();
  ASSERT_TRUE(q.RetryJob(pending->id).ok());
  ASSERT_TRUE(WaitForJob(q, pending->id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  EXPECT_EQ(q.RetryJob(pending->id).code(), StatusCode::kConflict);  // success is final
}

TEST_P(JobQueueTest, ACancelThroughAnotherNodeStopsTheRunningJob) {
  // Node A runs the job; node B (no workers: an API node) cancels it. A hears the notification and stops the
  // handler (its rescuer, the fallback for a missed notification, is off here); the attempt ends frozen.
  auto options_a = Options(&Clock::Real());
  options_a.rescue_interval = 0ms;
  options_a.worker_id = "node-a";
  std::string id;
  JobQueue& a = RunBlockingJob(options_a, &id);
  ASSERT_EQ(calls_.size(), 1u);

  auto options_b = Options(&Clock::Real());
  options_b.worker_id = "node-b";
  JobQueue& b = Open(options_b);
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(b.CancelJob(id).ok()) << "a job running elsewhere is asked to stop, not refused";
  ASSERT_TRUE(WaitForJob(b, id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }))
      << logs_.Dump();
  EXPECT_TRUE(flag_.load()) << "the handler saw its stop_token fire";
  const JobInfo job = b.GetJob(id).value();
  EXPECT_EQ(job.last_error, "Job was cancelled") << "a stopped attempt is not retried";
  EXPECT_EQ(job.attempt, 1);
  // A's completer counts the completion once its statement has returned, after B can see the row.
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(a, "octop_jobs_completed_total", {{"result", "cancelled"}}) == 1;
  }));
  EXPECT_EQ(b.CancelJob(id).code(), StatusCode::kConflict);  // finished now
}

TEST_P(JobQueueTest, ACancelRequestWhoseNotificationWasMissedIsReadAtTheNextRescuePass) {
  // The request is written without a notification (as if the node had been disconnected when it was sent):
  // the node reads the requests for the attempts it holds on each rescue pass.
  auto options = Options(&Clock::Real());
  options.rescue_interval = 50ms;
  std::string id;
  JobQueue& q = RunBlockingJob(options, &id);
  ASSERT_EQ(calls_.size(), 1u);
  ASSERT_TRUE(q.WithTransaction([&](Transaction& tx) -> Status {
                 return tx
                     .Execute(
                         "INSERT INTO octop_job_cancels (job_id, attempt_token, requested_at) "
                         "SELECT id, attempt_token, created_at FROM octop_jobs WHERE CAST(id AS text) = $1",
                         {id})
                     .status();
               }).ok());
  ASSERT_TRUE(WaitForJob(q, id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }))
      << logs_.Dump();
  EXPECT_TRUE(flag_.load());
  EXPECT_EQ(q.GetJob(id)->last_error, "Job was cancelled");
}

// Jobs written by SQL through a running node (docs/jobs.md "Jobs written by SQL"): a job INSERTed by plain
// SQL runs, and a frozen job that a DBA's UPDATE sets back to pending runs again. There is no periodic
// reconcile pass: on PostgreSQL the UPDATE's notification asks for one.
TEST_P(JobQueueTest, JobsInsertedOrRetriedByPlainSqlRun) {
  auto options = Options(&Clock::Real());
  options.reconcile_interval = 0ms;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("by-sql", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 return ctx.attempt == 1 ? JobResult::Fail("first attempt") : JobResult::Done();
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  const std::string id = "00000000-0000-7000-8000-0000000000d1";
  const bool pg = backend().is_postgres();
  ASSERT_TRUE(q.WithTransaction([&](Transaction& tx) -> Status {
                 return tx
                     .Execute(
                         std::string("INSERT INTO octop_jobs (id, kind, payload, max_retries, scheduled_at, "
                                     "created_at) VALUES ($1, 'by-sql', '{}', 0, ") +
                             (pg ? "now(), now())" : "$2, $2)"),
                         pg ? std::vector<std::optional<std::string>>{id}
                            : std::vector<std::optional<std::string>>{id, "2000-01-01 00:00:00.000"})
                     .status();
               }).ok());
  ASSERT_TRUE(WaitForJob(q, id, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }))
      << logs_.Dump();
  ASSERT_TRUE(
      q.WithTransaction([&](Transaction& tx) -> Status {
         return tx
             .Execute("UPDATE octop_jobs SET status = 'pending', max_retries = 1 WHERE CAST(id AS text) = $1",
                      {id})
             .status();
       }).ok());
  ASSERT_TRUE(WaitForJob(q, id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }))
      << logs_.Dump();
  EXPECT_EQ(calls_.size(), 2u);
}

TEST_P(JobQueueTest, TheRescuerReRunsAJobWhoseWorkerVanishedAndFencesTheLateCompletion) {
  // Node A claims the job, then "hangs" (its handler ignores the stop) past the expiry. Node B's rescuer puts
  // the job back and B runs it. When A's handler finally returns, its completion carries a stale token:
  // discarded.
  auto options_a = Options(&Clock::Real());
  options_a.rescue_interval = 0ms;  // A never rescues
  options_a.rescue_grace = 0ms;
  options_a.worker_id = "node-a";
  JobQueue& a = Open(options_a);
  ASSERT_TRUE(a.RegisterHandler("job",
                                [&](const JobContext& ctx) {
                                  calls_.Add(ctx);
                                  gate_.Wait(std::stop_token());  // deaf to its stop token
                                  return JobResult::Done();
                                },
                                {.timeout = 200ms})
                  .ok());
  ASSERT_TRUE(a.AddWorkers("default", 1).ok());
  ASSERT_TRUE(a.Start().ok());
  auto id = a.Enqueue(Spec("job"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(calls_.WaitFor(1));

  auto options_b = Options(&Clock::Real());
  options_b.rescue_interval = 20ms;
  options_b.worker_id = "node-b";
  JobQueue& b = Open(options_b);
  ASSERT_TRUE(b.RegisterHandler("job", [&](const JobContext& ctx) {
                 calls_b_.Add(ctx);
                 return JobResult::Done();
               }).ok());
  ASSERT_TRUE(b.AddWorkers("default", 1).ok());
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(calls_b_.WaitFor(1)) << logs_.Dump();
  EXPECT_EQ(calls_b_.calls().front().attempt, 2);
  ASSERT_TRUE(WaitForJob(b, id->id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));

  gate_.Open();
  ASSERT_TRUE(Eventually([&] {
    return MetricValue(a, "octop_jobs_completed_total", {{"result", "fenced"}}) == 1;
  }));
  auto job = b.GetJob(id->id);
  EXPECT_EQ(job->status, JobStatus::kSuccess);
  EXPECT_EQ(job->attempt, 2);
  EXPECT_EQ(MetricValue(b, "octop_jobs_rescued_total", {}), 1);
}

TEST_P(JobQueueTest, AForwardWallClockStepNeverReRunsJobsThatAreStillRunning) {
  // Two nodes on one host run jobs when the wall clock (and the database's now with it, as SQLite's) jumps
  // two hours: every lease looks expired to every rescuer. Each node spares its own jobs and renews their
  // leases, and its rescuer waits for the other node to renew its own: no job runs twice
  // (docs/reliability.md).
  runtime_testing::SteppedClock& clock = stepped_clock_;
  auto open_node = [&](const char* worker, CallLog& calls) -> JobQueue& {
    auto options = Options(&clock);
    options.rescue_interval = 50ms;
    options.worker_id = worker;
    JobQueue& q = Open(options);
    EXPECT_TRUE(q.RegisterHandler("job",
                                  [&](const JobContext& ctx) {
                                    calls.Add(ctx);
                                    gate_.Wait(ctx.stop_token);
                                    return JobResult::Done();
                                  },
                                  {.timeout = 60s})
                    .ok());
    EXPECT_TRUE(q.AddWorkers("default", 2).ok());
    EXPECT_TRUE(q.Start().ok());
    return q;
  };
  JobQueue& a = open_node("node-a", calls_);
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) ids.push_back(a.Enqueue(Spec("job")).value().id);
  ASSERT_TRUE(calls_.WaitFor(2));
  JobQueue& b = open_node("node-b", calls_b_);
  for (int i = 0; i < 2; ++i) ids.push_back(a.Enqueue(Spec("job")).value().id);
  ASSERT_TRUE(calls_b_.WaitFor(2));

  clock.Step(2h);
  const auto stepped = std::chrono::steady_clock::now();
  EXPECT_TRUE(Eventually([&] {
    return logs_.Count(LogLevel::kWarn, "renewed the leases of 2 running jobs of this node") == 2;
  })) << logs_.Dump();
  // Absence over the window in which a wrong rescue would come: past the holds (2 s), many rescue passes.
  EXPECT_FALSE(Eventually(
      [&] { return calls_.size() + calls_b_.size() > 4; },
      std::chrono::duration_cast<std::chrono::milliseconds>(stepped + 3s - std::chrono::steady_clock::now())))
      << "a job ran twice: " << logs_.Dump();
  gate_.Open();
  for (const std::string& id : ids) {
    ASSERT_TRUE(WaitForJob(a, id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
    EXPECT_EQ(a.GetJob(id)->attempt, 1);
  }
  EXPECT_EQ(calls_.size() + calls_b_.size(), 4u);
  EXPECT_EQ(MetricValue(a, "octop_jobs_rescued_total", {}), 0);
  EXPECT_EQ(MetricValue(b, "octop_jobs_rescued_total", {}), 0);
}

TEST_P(JobQueueTest, ConfigChangesApplyWithoutARestart) {
  JobQueue& q = Open(Options(&Clock::Real()));
  ASSERT_TRUE(q.Start().ok());
  EXPECT_EQ(q.poll_interval(), 1000ms);
  EXPECT_EQ(q.default_timeout(), std::chrono::milliseconds(std::chrono::minutes(5)));
  // Written by another node (a direct store): picked up through the config notification or the periodic
  // re-read.
  store::JobStore& direct = Direct(Clock::Real());
  ASSERT_TRUE(direct.SetConfig(kJobsPollIntervalKey, "250").ok());
  ASSERT_TRUE(direct.SetConfig(kJobsDefaultTimeoutKey, R"({"value": 42000})").ok());
  EXPECT_TRUE(Eventually([&] { return q.poll_interval() == 250ms && q.default_timeout() == 42000ms; }, 15s));
  ASSERT_TRUE(q.SetConfig(kJobsPollIntervalKey, "\"fast\"").ok());  // not a number: ignored with a warning
  EXPECT_TRUE(Eventually([&] { return q.poll_interval() == 1000ms; }, 15s));
  EXPECT_TRUE(logs_.Contains(LogLevel::kWarn, "Ignoring config jobs.poll_interval_ms"));
}

TEST_P(JobQueueTest, ShutdownLetsRunningJobsFinishAndRecordsThem) {
  auto options = Options(&Clock::Real());
  options.shutdown_grace = 30s;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("work", GatedHandler()).ok());
  ASSERT_TRUE(q.AddWorkers("default", 3).ok());
  ASSERT_TRUE(q.Start().ok());
  std::vector<JobSpec> specs(3, Spec("work"));
  auto ids = q.EnqueueMany(specs);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(calls_.WaitFor(3));
  std::thread stopper([&] { q.Shutdown(); });
  gate_.Open();
  stopper.join();
  store::JobStore& direct = Direct(Clock::Real());
  for (const auto& r : *ids) {
    auto row = direct.GetJob(r.id);
    ASSERT_TRUE(row.ok());
    EXPECT_EQ(row->status, JobStatus::kSuccess) << r.id;
  }
  EXPECT_EQ(q.AddWorkers("other", 1).code(), StatusCode::kFailedPrecondition);
}

TEST_P(JobQueueTest, ShutdownStopsJobsThatOutliveTheGraceAndRequeuesThem) {
  auto options = Options(&Clock::Real());
  options.shutdown_grace = 50ms;
  JobQueue& q = Open(options);
  ASSERT_TRUE(q.RegisterHandler("stubborn", [&](const JobContext& ctx) {
                 calls_.Add(ctx);
                 Gate never;
                 never.Wait(ctx.stop_token);
                 return JobResult::Fail("stopped");
               }).ok());
  ASSERT_TRUE(q.AddWorkers("default", 1).ok());
  ASSERT_TRUE(q.Start().ok());
  // No retries left after this attempt: a shutdown must still not freeze it (a deploy is not its fault).
  JobSpec spec = Spec("stubborn");
  spec.max_retries = 0;
  auto id = q.Enqueue(spec);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(calls_.WaitFor(1));
  q.Shutdown();
  store::JobStore& direct = Direct(Clock::Real());
  auto row = direct.GetJob(id->id);
  ASSERT_TRUE(row.ok());
  // Handed back: pending, the attempt not counted, due again at once for the next node.
  EXPECT_EQ(row->status, JobStatus::kPending);
  EXPECT_EQ(row->attempt, 0);
  EXPECT_EQ(row->attempt_token, std::nullopt);
  EXPECT_EQ(row->last_error, "Interrupted by shutdown");
  auto due = direct.DatabaseNow();
  ASSERT_TRUE(due.ok());
  EXPECT_LE(row->scheduled_at, *due);
}

// ---- Prefetch (JobQueueOptions::prefetch): jobs claimed beyond the free slots and held on this node.

long CountRunning(JobQueue& q) {
  auto jobs = q.ListJobs({.status = JobStatus::kRunning, .limit = 1000});
  return jobs.ok() ? static_cast<long>(jobs->size()) : -1;
}

// A queue with one worker slot and `options.prefetch`, `n` jobs of `spec` enqueued before its start; returned
// once the first job runs and `claimed` jobs are claimed (running in the database).
struct Holding {
  JobQueue* q = nullptr;
  std::vector<std::string> ids;  // enqueue order
  std::string ran;               // the job whose handler runs
};

class JobPrefetchTest : public JobQueueTestBase {
 protected:
  Holding StartHolding(const JobQueueOptions& options, JobHandler handler, const JobSpec& spec, int n,
                       long claimed, JobHandlerOptions handler_options = {}) {
    Holding h;
    h.q = &Open(options);
    EXPECT_TRUE(h.q->RegisterHandler(spec.kind, std::move(handler), handler_options).ok());
    EXPECT_TRUE(h.q->AddWorkers("default", 1).ok());
    auto ids = h.q->EnqueueMany(std::vector<JobSpec>(static_cast<std::size_t>(n), spec));
    EXPECT_TRUE(ids.ok());
    if (ids.ok()) {
      for (const auto& r : *ids) h.ids.push_back(r.id);
    }
    EXPECT_TRUE(h.q->Start().ok());
    EXPECT_TRUE(calls_.WaitFor(1));
    EXPECT_TRUE(Eventually([&] { return CountRunning(*h.q) == claimed; })) << CountRunning(*h.q);
    if (!calls_.calls().empty()) h.ran = calls_.calls().front().id;
    return h;
  }
};
INSTANTIATE_TEST_SUITE_P(Backends, JobPrefetchTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

TEST_P(JobPrefetchTest, ClaimsBeyondTheFreeSlotsAndRunsEveryHeldJobOnce) {
  auto options = Options(&Clock::Real());
  options.prefetch = 3;
  // One slot + a prefetch of 3: four claimed, one handler running, one job left pending.
  Holding h = StartHolding(options, GatedHandler(), Spec("work"), 5, 4);
  EXPECT_EQ(calls_.calls().size(), 1u);
  gate_.Open();
  for (const std::string& id : h.ids) {
    ASSERT_TRUE(WaitForJob(*h.q, id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; })) << id;
    EXPECT_EQ(h.q->GetJob(id)->attempt, 1) << id;
  }
  EXPECT_EQ(calls_.calls().size(), 5u);
}

TEST_P(JobPrefetchTest, AHeldJobIsHandedBackAfterTheTtlWithoutUsingAnAttempt) {
  testing::FakeClock& clock = fake_clock_;
  auto options = Options(&clock);
  options.prefetch = 2;
  options.prefetch_ttl = 5s;
  JobSpec spec = Spec("work");
  spec.max_retries = 0;  // a hand-back that counted as an attempt would freeze these jobs
  Holding h = StartHolding(options, GatedHandler(), spec, 3, 3);
  // The two held jobs wait past the TTL behind the blocked one: handed back (and claimed again).
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(1s);
    return MetricValue(*h.q, "octop_jobs_completed_total", {{"result", "released"}}) >= 2;
  })) << logs_.Dump();
  EXPECT_EQ(calls_.calls().size(), 1u) << "a held job was handed back, not run";
  gate_.Open();
  for (const std::string& id : h.ids) {
    ASSERT_TRUE(WaitForJob(*h.q, id, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }))
        << id << "\n"
        << logs_.Dump();
    EXPECT_EQ(h.q->GetJob(id)->attempt, 1) << id;
  }
}

TEST_P(JobPrefetchTest, AHeldJobPastItsTtlIsNotStartedWhenASlotFreesAtThatMoment) {
  testing::FakeClock& clock = fake_clock_;
  auto options = Options(&clock);
  options.prefetch = 1;
  options.prefetch_ttl = 5s;
  JobSpec spec = Spec("work");
  spec.max_retries = 0;
  Holding h = StartHolding(options, GatedHandler(), spec, 2, 2);
  const std::string held = h.ids[0] == h.ran ? h.ids[1] : h.ids[0];
  // Past the TTL and a free slot at once: the worker taking the held job and the producer's sweep race;
  // either way the job goes back to the queue before it runs (and then runs under a new claim).
  clock.Advance(6s);
  gate_.Open();
  ASSERT_TRUE(Eventually([&] {
    return MetricValue(*h.q, "octop_jobs_completed_total", {{"result", "released"}}) >= 1;
  })) << logs_.Dump();
  ASSERT_TRUE(WaitForJob(*h.q, held, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }))
      << logs_.Dump();
  EXPECT_EQ(h.q->GetJob(held)->attempt, 1) << "the released claim did not count";
}

TEST_P(JobPrefetchTest, ShutdownHandsHeldJobsBackInsteadOfRunningThem) {
  auto options = Options(&Clock::Real());
  options.prefetch = 3;
  options.shutdown_grace = 50ms;
  Holding h = StartHolding(
      options,
      [&](const JobContext& ctx) {
        calls_.Add(ctx);
        Gate never;
        never.Wait(ctx.stop_token);
        return JobResult::Fail("stopped");
      },
      Spec("stubborn"), 4, 4);
  h.q->Shutdown();
  EXPECT_EQ(calls_.calls().size(), 1u);
  store::JobStore& direct = Direct(Clock::Real());
  for (const std::string& id : h.ids) {
    auto row = direct.GetJob(id);
    ASSERT_TRUE(row.ok());
    if (id == h.ran) {
      EXPECT_EQ(row->status, JobStatus::kPending);
      EXPECT_EQ(row->attempt, 0);
      EXPECT_EQ(row->last_error, "Interrupted by shutdown");
    } else {
      EXPECT_EQ(row->status, JobStatus::kPending) << id;
      EXPECT_EQ(row->attempt, 0) << id;
      EXPECT_EQ(row->attempt_token, std::nullopt) << id;
    }
  }
}

TEST_P(JobPrefetchTest, CancelOfAHeldJobNeverRunsIt) {
  auto options = Options(&Clock::Real());
  options.prefetch = 1;
  Holding h = StartHolding(options, GatedHandler(), Spec("work"), 2, 2);
  const std::string held = h.ids[0] == h.ran ? h.ids[1] : h.ids[0];
  ASSERT_TRUE(h.q->CancelJob(held).ok());
  gate_.Open();
  ASSERT_TRUE(WaitForJob(*h.q, held, [](const JobInfo& j) { return j.status == JobStatus::kFrozen; }));
  EXPECT_EQ(h.q->GetJob(held)->last_error, "Job was cancelled");
  ASSERT_TRUE(WaitForJob(*h.q, h.ran, [](const JobInfo& j) { return j.status == JobStatus::kSuccess; }));
  EXPECT_EQ(calls_.calls().size(), 1u) << "the cancelled held job never reached its handler";
}

TEST_P(JobPrefetchTest, AHeldJobsTimeoutCountsFromItsStartNotItsClaim) {
  testing::FakeClock& clock = fake_clock_;
  auto options = Options(&clock);
  options.prefetch = 1;
  JobSpec spec = Spec("slow");
  spec.max_retries = 0;  // no third call: the handler's captures live in this body
  const WallTime t0 = clock.WallNow();
  std::optional<WallTime> stopped_at;  // guarded by mu_
  Holding h = StartHolding(options,
                           [&](const JobContext& ctx) {
                             calls_.Add(ctx);
                             if (calls_.calls().size() == 1) {
                               gate_.Wait(ctx.stop_token);
                               return JobResult::Done();
                             }
                             Gate never;
                             never.Wait(ctx.stop_token);
                             std::lock_guard lock(mu_);
                             stopped_at = clock.WallNow();
                             return JobResult::Fail("interrupted");
                           },
                           spec, 2, 2, {.timeout = 10s});  // both claimed at t0
  clock.Advance(8s);
  gate_.Open();  // the first ends at t0 + 8 s; the held one starts then
  ASSERT_TRUE(calls_.WaitFor(2));
  clock.Advance(9s);  // t0 + 17 s: 17 s after its claim, 9 s after its start
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(1s);
    std::lock_guard lock(mu_);
    return stopped_at.has_value();
  }));
  std::lock_guard lock(mu_);
  EXPECT_GE(*stopped_at - t0, 18s) << "the timeout must count from the start (t0 + 8 s), not the claim (t0)";
}

TEST_P(JobQueueTest, InvalidInputIsRefusedBeforeAnyWrite) {
  JobQueue& q = Open(Options(&Clock::Real()));
  EXPECT_EQ(q.Enqueue(Spec("")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.Enqueue(Spec("k", "[1,")).status().code(), StatusCode::kInvalidArgument);
  JobSpec negative = Spec("k");
  negative.max_retries = -1;
  EXPECT_EQ(q.Enqueue(negative).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.AddWorkers("q", 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.AddWorkers("", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.RegisterHandler("", [](const JobContext&) { return JobResult::Done(); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(q.ListJobs({.status = std::nullopt, .queue = std::nullopt, .kind = std::nullopt, .limit = 0})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto all = q.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  EXPECT_EQ(q.GetJob("nope").status().code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobQueueTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

}  // namespace
}  // namespace octop::job_testing
