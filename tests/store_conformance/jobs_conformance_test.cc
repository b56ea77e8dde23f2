// The job-queue operations of the Store (docs/jobs.md), on every backend: enqueue validation and
// atomicity, unique keys under concurrency, SKIP LOCKED claims, ordering, fencing, retries and freezing,
// rescue, manual retry/cancel, pause/resume, the summary and its views, config, retention, and transactional
// enqueue.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

JobSpec Job(std::string kind, std::string payload = "{}") {
  JobSpec job;
  job.kind = std::move(kind);
  job.payload = std::move(payload);
  return job;
}

class JobsTest : public StoreConformance {
 protected:
  std::string Enqueue(JobSpec job) {
    auto out = jobs_->EnqueueJobs({std::move(job)});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok() || out->size() != 1) return "";
    return out->front().id;
  }
  JobInfo Get(const std::string& id) {
    auto job = jobs_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : JobInfo{};
  }
  std::vector<JobInfo> Claim(int limit = 10, std::string queue = "default",
                             std::vector<std::string> kinds = {},
                             std::chrono::microseconds timeout = minutes(5)) {
    auto jobs = jobs_->ClaimJobs({.queue = std::move(queue),
                                  .limit = limit,
                                  .kinds = std::move(kinds),
                                  .timeout = timeout,
                                  .worker_id = "w1"});
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    return jobs.ok() ? *jobs : std::vector<JobInfo>{};
  }
  bool Complete(const JobInfo& job, JobOutcome outcome, std::optional<std::string> error = std::nullopt,
                std::chrono::microseconds delay = seconds(0)) {
    auto applied = jobs_->CompleteJobs({{.id = job.id,
                                         .attempt_token = job.attempt_token.value_or(""),
                                         .outcome = outcome,
                                         .error = std::move(error),
                                         .retry_delay = delay}});
    EXPECT_TRUE(applied.ok()) << applied.status().ToString();
    return applied.ok() && applied->size() == 1 && applied->front();
  }
  // One statement of plain SQL in a transaction of its own, as a DBA would run it.
  Status Sql(const std::string& statement, const std::vector<std::optional<std::string>>& params) {
    return jobs_->WithTransaction(
        [&](Transaction& tx) -> Status { return tx.Execute(statement, params).status(); });
  }
  long Count(std::optional<JobStatus> status = std::nullopt) {
    auto jobs = jobs_->ListJobs({.status = status, .limit = 1000});
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    return jobs.ok() ? static_cast<long>(jobs->size()) : -1;
  }
  std::vector<std::unique_ptr<JobStore>> Nodes(int n) {
    std::vector<std::unique_ptr<JobStore>> nodes;
    StoreOptions options;
    options.clock = &clock_;
    options.busy_timeout = std::chrono::seconds(60);  // 16 threads queue for SQLite's one writer lock
    for (int i = 0; i < n; ++i) nodes.push_back(OpenJobNode(options, ns_));
    return nodes;
  }
};

// Reuse the StoreConformance instantiations (Sqlite/..., Postgres/...) for this fixture too.
std::vector<Backend> BackendsNamed(const std::string& name) {
  std::vector<Backend> out;
  for (Backend& b : AllBackends()) {
    if (b.name == name) out.push_back(std::move(b));
  }
  return out;
}
std::string BackendName(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Sqlite, JobsTest, ::testing::ValuesIn(BackendsNamed("sqlite")), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, JobsTest, ::testing::ValuesIn(BackendsNamed("postgres")), BackendName);
INSTANTIATE_TEST_SUITE_P(Pgbouncer, JobsTest, ::testing::ValuesIn(BackendsNamed("pgbouncer")), BackendName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JobsTest);

// ---- Enqueue ----------------------------------------------------------------------------------------------

TEST_P(JobsTest, EnqueueStoresEveryColumn) {
  JobSpec job = Job("email.send", R"({"to": "a@example.com", "n": [1, 2]})");
  job.queue = "mail";
  job.priority = -5;
  job.max_retries = 7;
  job.unique_key = "mail:a";
  job.scheduled_at = clock_.WallNow() + seconds(30);
  const std::string id = Enqueue(job);
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '7') << "UUID version 7 (docs/store.md, \"Job ids\"): " << id;
  const JobInfo row = Get(id);
  EXPECT_EQ(row.id, id);
  EXPECT_EQ(row.queue, "mail");
  EXPECT_EQ(row.kind, "email.send");
  EXPECT_EQ(nlohmann::json::parse(row.payload), nlohmann::json::parse(job.payload));
  EXPECT_EQ(row.priority, -5);
  EXPECT_EQ(Show(row.scheduled_at), Show(t0() + seconds(30)));
  EXPECT_EQ(row.status, JobStatus::kPending);
  EXPECT_EQ(row.attempt, 0);
  EXPECT_EQ(row.max_retries, 7);
  EXPECT_EQ(row.attempt_token, std::nullopt);
  EXPECT_EQ(row.last_error, std::nullopt);
  EXPECT_EQ(Show(row.created_at), Show(t0()));
  EXPECT_EQ(Show(row.started_at), "NULL");
  EXPECT_EQ(Show(row.completed_at), "NULL");
  EXPECT_EQ(row.unique_key, std::optional<std::string>("mail:a"));
  EXPECT_EQ(row.worker_id, std::nullopt);
}

TEST_P(JobsTest, EnqueueAtAnAbsoluteTime) {
  JobSpec job = Job("k");
  job.scheduled_at = t0() + hours(2);
  EXPECT_EQ(Show(Get(Enqueue(job)).scheduled_at), Show(t0() + hours(2)));
}

TEST_P(JobsTest, EnqueueRejectsInvalidJsonAndWritesNothing) {
  std::vector<JobSpec> batch = {Job("ok"), Job("ok"), Job("bad", "{not json")};
  auto out = jobs_->EnqueueJobs(batch);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("job 2"), std::string::npos) << out.status().message();
  EXPECT_EQ(Count(), 0);
  EXPECT_EQ(jobs_->EnqueueJobs({Job("k", "")}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Count(), 0);
}

TEST_P(JobsTest, APayloadKeepsNumbersBeyondADoubleAndOneWithU0000IsRefusedOnEveryBackend) {
  // PostgreSQL's jsonb keeps a number's digits; SQLite keeps the text. Both give back every digit.
  const std::string id =
      Enqueue(Job("k", R"({"n":123456789012345678901234567890,"r":0.12345678901234567890123})"));
  const std::string payload = Get(id).payload;
  EXPECT_NE(payload.find("123456789012345678901234567890"), std::string::npos) << payload;
  EXPECT_NE(payload.find("0.12345678901234567890123"), std::string::npos) << payload;
  // jsonb cannot store U+0000; SQLite could, and refuses it too, so a payload works on both or on neither.
  for (const char* bad : {R"({"a":"x\u0000y"})", R"(["\u0000"])", R"({"\u0000":1})"}) {
    auto out = jobs_->EnqueueJobs({Job("k"), Job("k", bad)});
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(out.status().message().find("job 1: payload contains the escape \\u0000"), std::string::npos)
        << out.status().message();
  }
  // An escaped backslash before the letters u0000 is not U+0000.
  EXPECT_EQ(nlohmann::json::parse(Get(Enqueue(Job("k", R"(["\\u0000"])"))).payload)[0], "\\u0000");
  EXPECT_EQ(Count(), 2);
}

TEST_P(JobsTest, EnqueueRejectsNegativeMaxRetriesAndWritesNothing) {
  JobSpec bad = Job("k");
  bad.max_retries = -1;
  auto out = jobs_->EnqueueJobs({Job("k"), bad});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("max_retries"), std::string::npos) << out.status().message();
  EXPECT_EQ(Count(), 0);
}

TEST_P(JobsTest, EnqueueRejectsBadNamesAndEmptyBatches) {
  EXPECT_EQ(jobs_->EnqueueJobs({Job("")}).status().code(), StatusCode::kInvalidArgument);
  JobSpec no_queue = Job("k");
  no_queue.queue = "";
  EXPECT_EQ(jobs_->EnqueueJobs({no_queue}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->EnqueueJobs({Job(std::string(256, 'k'))}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->EnqueueJobs({Job("bad\xff utf8")}).status().code(), StatusCode::kInvalidArgument);
  JobSpec empty_key = Job("k");
  empty_key.unique_key = "";
  EXPECT_EQ(jobs_->EnqueueJobs({empty_key}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->EnqueueJobs({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Count(), 0);
  // Quotes, percent signs and unicode are data, not SQL.
  JobSpec odd = Job("k'; DROP TABLE octop_jobs; --", R"({"s":"100% \"quoted\" ünïcødé 🐙"})");
  odd.queue = "q'\"%";
  const std::string id = Enqueue(odd);
  EXPECT_EQ(Get(id).kind, odd.kind);
  EXPECT_EQ(Get(id).queue, odd.queue);
  EXPECT_EQ(nlohmann::json::parse(Get(id).payload)["s"], "100% \"quoted\" ünïcødé 🐙");
}

TEST_P(JobsTest, EnqueueBatchReturnsIdsInInputOrder) {
  std::vector<JobSpec> batch;
  for (int i = 0; i < 200; ++i)
    batch.push_back(Job("k" + std::to_string(i), R"({"i":)" + std::to_string(i) + "}"));
  auto out = jobs_->EnqueueJobs(batch);
  OCTOP_ASSERT_OK(out);
  ASSERT_EQ(out->size(), 200u);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < out->size(); ++i) {
    EXPECT_FALSE((*out)[i].existing);
    ids.insert((*out)[i].id);
    if (i % 37 == 0) {
      EXPECT_EQ(Get((*out)[i].id).kind, "k" + std::to_string(i));
    }
  }
  EXPECT_EQ(ids.size(), 200u);
  EXPECT_EQ(Count(JobStatus::kPending), 200);
}

// ---- Unique keys ------------------------------------------------------------------------------------------

TEST_P(JobsTest, UniqueKeyReturnsTheLiveJob) {
  JobSpec job = Job("k");
  job.unique_key = "only-one";
  auto first = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(first);
  auto second = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(second);
  EXPECT_FALSE(first->front().existing);
  EXPECT_TRUE(second->front().existing);
  EXPECT_EQ(second->front().id, first->front().id);
  // Running still holds the key.
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  auto third = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(third);
  EXPECT_TRUE(third->front().existing);
  // Once it succeeded, the key is free again.
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));
  auto fourth = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(fourth);
  EXPECT_FALSE(fourth->front().existing);
  EXPECT_NE(fourth->front().id, first->front().id);
}

TEST_P(JobsTest, UniqueKeyIsHeldWhileAwaitingRetryAndFreedWhenFrozen) {
  JobSpec job = Job("k");
  job.unique_key = "retrying";
  job.max_retries = 1;
  const std::string id = Enqueue(job);
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "boom", minutes(1)));
  ASSERT_EQ(Get(id).status, JobStatus::kFailed);
  auto again = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(again);
  EXPECT_TRUE(again->front().existing);
  EXPECT_EQ(again->front().id, id);
  clock_.Advance(minutes(1));
  claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "boom again"));
  ASSERT_EQ(Get(id).status, JobStatus::kFrozen);
  auto fresh = jobs_->EnqueueJobs({job});
  OCTOP_ASSERT_OK(fresh);
  EXPECT_FALSE(fresh->front().existing);
}

TEST_P(JobsTest, UniqueKeyDuplicatesInsideOneBatch) {
  JobSpec a = Job("k");
  a.unique_key = "dup";
  auto out = jobs_->EnqueueJobs({a, Job("other"), a});
  OCTOP_ASSERT_OK(out);
  ASSERT_EQ(out->size(), 3u);
  EXPECT_FALSE((*out)[0].existing);
  EXPECT_FALSE((*out)[1].existing);
  EXPECT_TRUE((*out)[2].existing);
  EXPECT_EQ((*out)[2].id, (*out)[0].id);
  EXPECT_EQ(Count(), 2);
}

// 16 threads on 4 Stores enqueue the same key at once, round after round: exactly one job per key, and every
// caller gets its id.
TEST_P(JobsTest, UniqueKeyUnderSixteenConcurrentEnqueuers) {
  constexpr int kThreads = 16;
  constexpr int kRounds = 10;
  auto nodes = Nodes(4);
  for (const auto& n : nodes) ASSERT_NE(n, nullptr);
  std::mutex mu;
  std::map<std::string, std::set<std::string>> ids_by_key;
  std::map<std::string, int> inserted_by_key;
  std::vector<std::string> errors;
  std::barrier sync(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        JobStore& node = *nodes[static_cast<std::size_t>(t % 4)];
        for (int r = 0; r < kRounds; ++r) {
          JobSpec job = Job("k");
          job.unique_key = "key-" + std::to_string(r);
          sync.arrive_and_wait();
          auto out = node.EnqueueJobs({job});
          std::lock_guard lock(mu);
          if (!out.ok()) {
            errors.push_back(out.status().ToString());
            continue;
          }
          ids_by_key[*job.unique_key].insert(out->front().id);
          if (!out->front().existing) ++inserted_by_key[*job.unique_key];
        }
      });
    }
  }
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  ASSERT_EQ(ids_by_key.size(), static_cast<std::size_t>(kRounds));
  for (const auto& [key, ids] : ids_by_key) {
    EXPECT_EQ(ids.size(), 1u) << key;
    EXPECT_EQ(inserted_by_key[key], 1) << key;
  }
  EXPECT_EQ(Count(), kRounds);
}

// ---- Claims -----------------------------------------------------------------------------------------------

TEST_P(JobsTest, ClaimMarksRunningWithAFreshToken) {
  const std::string id = Enqueue(Job("k"));
  clock_.Advance(seconds(3));
  auto claimed = Claim(10, "default", {}, seconds(90));
  ASSERT_EQ(claimed.size(), 1u);
  const JobInfo& job = claimed[0];
  EXPECT_EQ(job.id, id);
  EXPECT_EQ(job.status, JobStatus::kRunning);
  EXPECT_EQ(job.attempt, 1);
  ASSERT_TRUE(job.attempt_token.has_value());
  EXPECT_EQ(job.attempt_token->size(), 36u);
  EXPECT_EQ(Show(job.started_at), Show(t0() + seconds(3)));
  EXPECT_EQ(Show(job.expires_at), Show(t0() + seconds(93)));
  EXPECT_EQ(job.worker_id, std::optional<std::string>("w1"));
  const JobInfo stored = Get(id);
  EXPECT_EQ(stored.status, JobStatus::kRunning);
  EXPECT_EQ(stored.attempt_token, job.attempt_token);
  EXPECT_TRUE(Claim().empty()) << "a running job is not claimable";
}

TEST_P(JobsTest, ClaimOrdersByPriorityThenScheduledAt) {
  auto at = [&](int priority, int seconds_ago, std::string kind) {
    JobSpec job = Job(std::move(kind));
    job.priority = priority;
    job.scheduled_at = t0() - seconds(seconds_ago);
    Enqueue(job);
  };
  at(5, 100, "p5-old");
  at(0, 10, "p0-new");
  at(0, 50, "p0-old");
  at(-1, 1, "pm1");
  at(5, 200, "p5-older");
  auto claimed = Claim(3);
  ASSERT_EQ(claimed.size(), 3u);
  EXPECT_EQ(claimed[0].kind, "pm1");
  EXPECT_EQ(claimed[1].kind, "p0-old");
  EXPECT_EQ(claimed[2].kind, "p0-new");
  claimed = Claim(10);
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_EQ(claimed[0].kind, "p5-older");
  EXPECT_EQ(claimed[1].kind, "p5-old");
}

TEST_P(JobsTest, ClaimWaitsForScheduledAt) {
  JobSpec later = Job("later");
  later.scheduled_at = clock_.WallNow() + minutes(10);
  Enqueue(later);
  EXPECT_TRUE(Claim().empty());
  clock_.Advance(minutes(10) - milliseconds(1));
  EXPECT_TRUE(Claim().empty());
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(Claim().size(), 1u);
}

TEST_P(JobsTest, ClaimFiltersByQueueAndKinds) {
  JobSpec other_queue = Job("a");
  other_queue.queue = "other";
  Enqueue(other_queue);
  Enqueue(Job("a"));
  Enqueue(Job("b"));
  Enqueue(Job("c"));
  auto claimed = Claim(10, "default", {"a", "c"});
  ASSERT_EQ(claimed.size(), 2u);
  std::set<std::string> kinds = {claimed[0].kind, claimed[1].kind};
  EXPECT_EQ(kinds, (std::set<std::string>{"a", "c"}));
  for (const JobInfo& job : claimed) EXPECT_EQ(job.queue, "default");
  auto other = Claim(10, "other");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].queue, "other");
  EXPECT_EQ(Claim(10).size(), 1u);  // "b"
}

TEST_P(JobsTest, ClaimRejectsBadLimits) {
  EXPECT_EQ(jobs_->ClaimJobs({.limit = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->ClaimJobs({.limit = 1001}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->ClaimJobs({.queue = ""}).status().code(), StatusCode::kInvalidArgument);
}

// 5,000 jobs drained by 16 threads over 4 Stores, each claiming batches: every job is handed out exactly
// once.
TEST_P(JobsTest, SkipLockedNeverHandsAJobToTwoClaimers) {
  constexpr int kJobs = 5000;
  constexpr int kThreads = 16;
  std::vector<JobSpec> batch;
  for (int i = 0; i < kJobs; ++i) batch.push_back(Job("n", R"({"i":)" + std::to_string(i) + "}"));
  for (std::size_t from = 0; from < batch.size(); from += 1000) {
    std::vector<JobSpec> part(batch.begin() + static_cast<long>(from),
                              batch.begin() + static_cast<long>(std::min(from + 1000, batch.size())));
    OCTOP_ASSERT_OK(jobs_->EnqueueJobs(part));
  }
  auto nodes = Nodes(4);
  for (const auto& n : nodes) ASSERT_NE(n, nullptr);
  std::mutex mu;
  std::map<std::string, int> claims;
  std::vector<std::string> errors;
  std::atomic<int> claimed_total{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        JobStore& node = *nodes[static_cast<std::size_t>(t % 4)];
        int empty_rounds = 0;
        while (claimed_total.load() < kJobs && empty_rounds < 1000) {
          auto jobs =
              node.ClaimJobs({.limit = 8, .timeout = minutes(10), .worker_id = "t" + std::to_string(t)});
          if (!jobs.ok()) {
            std::lock_guard lock(mu);
            errors.push_back(jobs.status().ToString());
            continue;
          }
          if (jobs->empty()) {
            ++empty_rounds;
            continue;
          }
          std::vector<JobCompletion> done;
          {
            std::lock_guard lock(mu);
            for (const JobInfo& job : *jobs) {
              ++claims[job.id];
              done.push_back({.id = job.id, .attempt_token = job.attempt_token.value_or("")});
            }
          }
          claimed_total += static_cast<int>(jobs->size());
          auto applied = node.CompleteJobs(done);
          std::lock_guard lock(mu);
          if (!applied.ok()) {
            errors.push_back(applied.status().ToString());
          } else if (std::count(applied->begin(), applied->end(), true) != static_cast<long>(done.size())) {
            errors.push_back("a completion of a just-claimed job was not applied");
          }
        }
      });
    }
  }
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_EQ(claims.size(), static_cast<std::size_t>(kJobs));
  int twice = 0;
  for (const auto& [id, n] : claims) twice += n > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0) << "jobs handed out more than once";
  auto summary = jobs_->SummarizeJobs();
  OCTOP_ASSERT_OK(summary);
  ASSERT_EQ(summary->size(), 1u);
  EXPECT_EQ((*summary)[0].status, JobStatus::kSuccess);
  EXPECT_EQ((*summary)[0].count, kJobs);
}

// ---- Completion, fencing, retries -------------------------------------------------------------------------

TEST_P(JobsTest, SuccessSetsCompletedAt) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  clock_.Advance(seconds(2));
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));
  const JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kSuccess);
  EXPECT_EQ(Show(row.completed_at), Show(t0() + seconds(2)));
  EXPECT_EQ(Show(row.expires_at), "NULL");
  EXPECT_EQ(row.last_error, std::nullopt);
  EXPECT_FALSE(Complete(claimed[0], JobOutcome::kSuccess)) << "a second completion is not applied";
}

TEST_P(JobsTest, StaleTokenCompletionIsRejected) {
  const std::string id = Enqueue(Job("k"));
  auto first = Claim(1, "default", {}, seconds(10));
  ASSERT_EQ(first.size(), 1u);
  clock_.Advance(seconds(11));
  auto rescued = jobs_->RescueExpiredJobs({.backoff_base = seconds(0), .backoff_max = seconds(0)});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 1u);
  auto second = Claim(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, id);
  EXPECT_EQ(second[0].attempt, 2);
  EXPECT_NE(second[0].attempt_token, first[0].attempt_token);
  EXPECT_FALSE(Complete(first[0], JobOutcome::kSuccess))
      << "the rescued attempt's late completion is fenced off";
  EXPECT_EQ(Get(id).status, JobStatus::kRunning);
  EXPECT_TRUE(Complete(second[0], JobOutcome::kSuccess));
  EXPECT_EQ(Get(id).status, JobStatus::kSuccess);
}

TEST_P(JobsTest, CompleteBatchReportsEachItem) {
  Enqueue(Job("a"));
  Enqueue(Job("b"));
  auto claimed = Claim(2);
  ASSERT_EQ(claimed.size(), 2u);
  auto applied = jobs_->CompleteJobs({
      {.id = claimed[0].id, .attempt_token = *claimed[0].attempt_token},
      {.id = claimed[1].id, .attempt_token = "not-the-token"},
      {.id = "not-a-uuid", .attempt_token = "x"},
      {.id = claimed[1].id,
       .attempt_token = *claimed[1].attempt_token,
       .outcome = JobOutcome::kCancel,
       .error = "gave up"},
  });
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(Get(claimed[0].id).status, JobStatus::kSuccess);
  EXPECT_EQ(Get(claimed[1].id).status, JobStatus::kFrozen);
  auto empty = jobs_->CompleteJobs({});
  OCTOP_ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST_P(JobsTest, RetryLaterIsNotClaimableUntilDue) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kRetry, "try later", seconds(30)));
  JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kFailed);
  EXPECT_EQ(Show(row.scheduled_at), Show(t0() + seconds(30)));
  EXPECT_EQ(row.last_error, std::optional<std::string>("try later"));
  EXPECT_EQ(Show(row.completed_at), "NULL");
  EXPECT_TRUE(Claim().empty());
  clock_.Advance(seconds(29));
  EXPECT_TRUE(Claim().empty());
  clock_.Advance(seconds(1));
  auto again = Claim();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 2);
}

TEST_P(JobsTest, FreezesAfterMaxRetries) {
  JobSpec job = Job("k");
  job.max_retries = 2;
  const std::string id = Enqueue(job);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto claimed = Claim();
    ASSERT_EQ(claimed.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(claimed[0].attempt, attempt);
    ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "fail " + std::to_string(attempt), seconds(5)));
    const JobInfo row = Get(id);
    if (attempt < 3) {
      EXPECT_EQ(row.status, JobStatus::kFailed) << "attempt " << attempt;
    } else {
      EXPECT_EQ(row.status, JobStatus::kFrozen);
      EXPECT_EQ(row.last_error, std::optional<std::string>("fail 3"));
      EXPECT_EQ(Show(row.completed_at), Show(clock_.WallNow()));
    }
    clock_.Advance(seconds(5));
  }
  EXPECT_TRUE(Claim().empty()) << "a frozen job is never claimed";
}

TEST_P(JobsTest, ZeroRetriesFreezesAtTheFirstFailure) {
  JobSpec job = Job("k");
  job.max_retries = 0;
  const std::string id = Enqueue(job);
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "no"));
  EXPECT_EQ(Get(id).status, JobStatus::kFrozen);
}

TEST_P(JobsTest, CancelOutcomeFreezesWithAttemptsLeft) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kCancel, "handler gave up"));
  const JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kFrozen);
  EXPECT_EQ(row.attempt, 1);
  EXPECT_EQ(row.last_error, std::optional<std::string>("handler gave up"));
}

TEST_P(JobsTest, ReleaseUndoesTheClaimOfAFreshJob) {
  JobSpec job = Job("k");
  job.max_retries = 0;  // a release is not an attempt: even a job without retries stays claimable
  const std::string id = Enqueue(job);
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kRelease));
  JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kPending);
  EXPECT_EQ(row.attempt, 0);
  EXPECT_EQ(row.attempt_token, std::nullopt);
  EXPECT_EQ(row.worker_id, std::nullopt);
  EXPECT_EQ(Show(row.started_at), "NULL");
  EXPECT_EQ(Show(row.expires_at), "NULL");
  EXPECT_EQ(Show(row.completed_at), "NULL");
  EXPECT_EQ(row.last_error, std::nullopt);
  EXPECT_FALSE(Complete(claimed[0], JobOutcome::kSuccess)) << "the released attempt's token is stale";
  EXPECT_FALSE(Complete(claimed[0], JobOutcome::kRelease)) << "a second release is fenced too";
  auto again = Claim();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 1);
  EXPECT_NE(again[0].attempt_token, claimed[0].attempt_token) << "every claim gets a new token";
  ASSERT_TRUE(Complete(again[0], JobOutcome::kSuccess));
  EXPECT_EQ(Get(id).status, JobStatus::kSuccess);
}

TEST_P(JobsTest, ReleaseOfARetryKeepsItsAttemptsAndError) {
  JobSpec job = Job("k");
  job.max_retries = 1;
  const std::string id = Enqueue(job);
  auto first = Claim();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(Complete(first[0], JobOutcome::kFail, "boom", seconds(5)));
  clock_.Advance(seconds(5));
  auto second = Claim();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].attempt, 2);
  ASSERT_TRUE(Complete(second[0], JobOutcome::kRelease, second[0].last_error));
  JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kFailed);
  EXPECT_EQ(row.attempt, 1);
  EXPECT_EQ(row.last_error, std::optional<std::string>("boom"));
  EXPECT_EQ(row.attempt_token, std::nullopt);
  EXPECT_EQ(Show(row.expires_at), "NULL");
  auto third = Claim();
  ASSERT_EQ(third.size(), 1u) << "still due";
  EXPECT_EQ(third[0].attempt, 2);
  ASSERT_TRUE(Complete(third[0], JobOutcome::kFail, "boom again"));
  EXPECT_EQ(Get(id).status, JobStatus::kFrozen) << "the released claim did not use up the last attempt";
}

TEST_P(JobsTest, ReleaseOfAFinishedJobIsNotApplied) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));
  EXPECT_FALSE(Complete(claimed[0], JobOutcome::kRelease));
  const JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kSuccess);
  EXPECT_EQ(row.attempt, 1);
}

TEST_P(JobsTest, LastErrorIsTruncatedAtACharacterBoundary) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  std::string error = "x";
  while (error.size() < 3000)
    error += "é";  // 2-byte characters after one ASCII byte: 1024 falls mid-character
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, error));
  const JobInfo row = Get(id);
  ASSERT_TRUE(row.last_error.has_value());
  EXPECT_EQ(row.last_error->size(), 1023u);
  EXPECT_EQ(*row.last_error, error.substr(0, 1023));
}

// ---- Rescue -----------------------------------------------------------------------------------------------

TEST_P(JobsTest, RescueRetriesWithBackoffOrFreezes) {
  JobSpec retryable = Job("retryable");
  retryable.max_retries = 3;
  const std::string a = Enqueue(retryable);
  JobSpec last = Job("last");
  last.max_retries = 0;
  const std::string b = Enqueue(last);
  JobSpec long_running = Job("not-expired");
  long_running.priority = 1;  // claimed after a and b
  const std::string c = Enqueue(long_running);
  auto claimed = Claim(2, "default", {}, seconds(10));
  ASSERT_EQ(claimed.size(), 2u);
  auto long_one = Claim(1, "default", {}, hours(1));
  ASSERT_EQ(long_one.size(), 1u);
  EXPECT_EQ(long_one[0].id, c);
  clock_.Advance(seconds(10));
  auto none = jobs_->RescueExpiredJobs({});
  OCTOP_ASSERT_OK(none);
  EXPECT_TRUE(none->empty()) << "expires_at = now is not yet expired";
  clock_.Advance(milliseconds(1));
  auto rescued = jobs_->RescueExpiredJobs({.backoff_base = seconds(4), .backoff_max = minutes(1)});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 2u);
  std::map<std::string, RescuedJob> by_id;
  for (const RescuedJob& r : *rescued) by_id[r.id] = r;
  EXPECT_EQ(by_id[a].status, JobStatus::kFailed);
  EXPECT_EQ(by_id[b].status, JobStatus::kFrozen);
  const JobInfo ra = Get(a);
  EXPECT_EQ(ra.status, JobStatus::kFailed);
  EXPECT_EQ(ra.last_error, std::optional<std::string>(std::string(kJobTimedOutError)));
  EXPECT_EQ(Show(ra.scheduled_at), Show(clock_.WallNow() + seconds(4)));  // attempt 1: base * 2^0
  EXPECT_EQ(Show(ra.expires_at), "NULL");
  EXPECT_EQ(Get(b).status, JobStatus::kFrozen);
  EXPECT_EQ(Get(c).status, JobStatus::kRunning);
  // Second expiry of `a`: attempt 2, backoff doubles.
  clock_.Advance(seconds(4));
  auto again = Claim(1, "default", {}, seconds(1));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, a);
  clock_.Advance(seconds(2));
  OCTOP_ASSERT_OK(jobs_->RescueExpiredJobs({.backoff_base = seconds(4), .backoff_max = minutes(1)}));
  EXPECT_EQ(Show(Get(a).scheduled_at), Show(clock_.WallNow() + seconds(8)));
}

TEST_P(JobsTest, RescueSparesTheCallersOwnAttempts) {
  const std::string mine = Enqueue(Job("mine"));
  auto first = Claim(1, "default", {}, seconds(10));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].id, mine);
  const std::string theirs = Enqueue(Job("theirs"));
  auto second = Claim(1, "default", {}, seconds(10));
  ASSERT_EQ(second.size(), 1u);
  ASSERT_TRUE(first[0].attempt_token.has_value());
  clock_.Advance(seconds(11));
  auto rescued = jobs_->RescueExpiredJobs({.spare_tokens = {*first[0].attempt_token, "not-a-token"}});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 1u);
  EXPECT_EQ((*rescued)[0].id, theirs);
  EXPECT_EQ(Get(mine).status, JobStatus::kRunning);
}

TEST_P(JobsTest, RescueTakesTheEarlierOfNowAndExpiredBefore) {
  const std::string id = Enqueue(Job("a"));
  ASSERT_EQ(Claim(1, "default", {}, seconds(10)).size(), 1u);
  const WallTime claimed_at = clock_.WallNow();
  // The database's clock stepped two hours ahead; the rescuer's estimate (before the step) is 1 s later.
  clock_.StepWall(hours(2));
  auto rescued = jobs_->RescueExpiredJobs({.expired_before = claimed_at + seconds(1)});
  OCTOP_ASSERT_OK(rescued);
  EXPECT_TRUE(rescued->empty());
  EXPECT_EQ(Get(id).status, JobStatus::kRunning);
  rescued = jobs_->RescueExpiredJobs({.expired_before = claimed_at + seconds(10) + milliseconds(1)});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 1u);
  EXPECT_EQ((*rescued)[0].id, id);
  // A bound beyond now is no wider than now.
  const std::string later = Enqueue(Job("b"));
  ASSERT_EQ(Claim(1, "default", {}, seconds(10)).size(), 1u);
  rescued = jobs_->RescueExpiredJobs({.expired_before = clock_.WallNow() + hours(5)});
  OCTOP_ASSERT_OK(rescued);
  EXPECT_TRUE(rescued->empty());
  EXPECT_EQ(Get(later).status, JobStatus::kRunning);
}

TEST_P(JobsTest, RenewJobLeasesRebasesRunningAttemptsOnNow) {
  const std::string a = Enqueue(Job("a"));
  const std::string b = Enqueue(Job("b"));
  auto claimed = Claim(2, "default", {}, seconds(10));
  ASSERT_EQ(claimed.size(), 2u);
  ASSERT_TRUE(claimed[0].attempt_token.has_value() && claimed[1].attempt_token.has_value());
  // The wall clock steps forward two hours: every lease looks expired. The owner renews from now.
  clock_.StepWall(hours(2));
  auto renewed = jobs_->RenewJobLeases(
      {.tokens = {*claimed[0].attempt_token, *claimed[1].attempt_token}, .lease = seconds(30)});
  OCTOP_ASSERT_OK(renewed);
  EXPECT_EQ(*renewed, 2);
  EXPECT_EQ(Show(Get(a).expires_at), Show(clock_.WallNow() + seconds(30)));
  auto rescued = jobs_->RescueExpiredJobs({});
  OCTOP_ASSERT_OK(rescued);
  EXPECT_TRUE(rescued->empty());
  renewed = jobs_->RenewJobLeases({.tokens = {"stale"}, .lease = seconds(30)});
  OCTOP_ASSERT_OK(renewed);
  EXPECT_EQ(*renewed, 0);
  renewed = jobs_->RenewJobLeases({});
  OCTOP_ASSERT_OK(renewed);
  EXPECT_EQ(*renewed, 0);
  EXPECT_EQ(Get(b).status, JobStatus::kRunning);
}

// ---- Manual retry and cancel ------------------------------------------------------------------------------

TEST_P(JobsTest, RetryJobGivesAFrozenJobOneMoreAttempt) {
  JobSpec job = Job("k");
  job.max_retries = 0;
  const std::string id = Enqueue(job);
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "bad"));
  ASSERT_EQ(Get(id).status, JobStatus::kFrozen);
  clock_.Advance(minutes(1));
  OCTOP_ASSERT_OK(jobs_->RetryJob({id}));
  JobInfo row = Get(id);
  EXPECT_EQ(row.status, JobStatus::kPending);
  EXPECT_EQ(Show(row.scheduled_at), Show(t0() + minutes(1)));
  EXPECT_EQ(row.attempt, 1);
  EXPECT_EQ(row.max_retries, 1);
  EXPECT_EQ(Show(row.completed_at), "NULL");
  claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].attempt, 2);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "still bad"));
  EXPECT_EQ(Get(id).status, JobStatus::kFrozen) << "exactly one more attempt";
}

// A refused retry changes nothing: a job scheduled for later stays scheduled for later, and a failed job's
// retry makes it due now without a second copy of it becoming claimable.
TEST_P(JobsTest, RetryOfAPendingJobKeepsItsScheduleAndAFailedJobIsClaimedOnce) {
  JobSpec later = Job("k");
  later.scheduled_at = t0() + std::chrono::hours(1);
  const std::string id = Enqueue(later);
  EXPECT_EQ(jobs_->RetryJob({id}).code(), StatusCode::kConflict);
  EXPECT_TRUE(Claim(10).empty()) << "the refused retry made a job scheduled for later due now";
  EXPECT_EQ(Show(Get(id).scheduled_at), Show(t0() + std::chrono::hours(1)));

  const std::string failing = Enqueue(Job("k"));
  auto claimed = Claim(10);
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kRetry, "later", std::chrono::hours(2)));
  ASSERT_EQ(Get(failing).status, JobStatus::kFailed);
  OCTOP_ASSERT_OK(jobs_->RetryJob({failing}));
  auto again = Claim(10);
  ASSERT_EQ(again.size(), 1u) << "the retried job, once";
  EXPECT_EQ(again[0].id, failing);
  EXPECT_TRUE(Claim(10).empty());
}

TEST_P(JobsTest, RetryJobErrors) {
  const std::string id = Enqueue(Job("k"));
  Status pending = jobs_->RetryJob({id});
  EXPECT_EQ(pending.code(), StatusCode::kConflict);
  EXPECT_EQ(pending.message(), "Job " + id + " is pending, only failed or frozen jobs can be retried");
  const std::string missing = "00000000-0000-4000-8000-000000000000";
  Status not_found = jobs_->RetryJob({missing});
  EXPECT_EQ(not_found.code(), StatusCode::kNotFound);
  EXPECT_EQ(not_found.message(), "Job " + missing + " does not exist");
  EXPECT_EQ(jobs_->RetryJob({"nope'"}).code(), StatusCode::kNotFound);
  // A frozen job whose unique key another live job took meanwhile cannot come back.
  JobSpec keyed = Job("k");
  keyed.unique_key = "shared";
  keyed.max_retries = 0;
  const std::string frozen = Enqueue(keyed);
  auto claimed = Claim(10, "default", {"k"});
  for (const JobInfo& j : claimed) {
    if (j.id == frozen) {
      ASSERT_TRUE(Complete(j, JobOutcome::kFail, "x"));
    }
  }
  ASSERT_EQ(Get(frozen).status, JobStatus::kFrozen);
  const std::string taker = Enqueue(keyed);
  ASSERT_NE(taker, frozen);
  EXPECT_EQ(jobs_->RetryJob({frozen}).code(), StatusCode::kConflict);
  EXPECT_EQ(Get(frozen).status, JobStatus::kFrozen);
}

TEST_P(JobsTest, CancelJobFreezesWaitingJobs) {
  const std::string pending = Enqueue(Job("k"));
  clock_.Advance(seconds(1));
  OCTOP_ASSERT_OK(jobs_->CancelJob({pending}));
  JobInfo row = Get(pending);
  EXPECT_EQ(row.status, JobStatus::kFrozen);
  EXPECT_EQ(row.last_error, std::optional<std::string>("Job was cancelled"));
  EXPECT_EQ(Show(row.completed_at), Show(t0() + seconds(1)));
  EXPECT_TRUE(Claim().empty());
  // A failed job awaiting its retry can be cancelled too.
  const std::string failed = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "x", minutes(5)));
  OCTOP_ASSERT_OK(jobs_->CancelJob({failed}));
  EXPECT_EQ(Get(failed).status, JobStatus::kFrozen);
}

TEST_P(JobsTest, CancelJobErrors) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));
  Status finished = StatusOf(jobs_->CancelJob({id}));
  EXPECT_EQ(finished.code(), StatusCode::kConflict);
  EXPECT_EQ(finished.message(), "Job " + id + " has already finished");
  const std::string missing = "00000000-0000-4000-8000-000000000001";
  Status not_found = StatusOf(jobs_->CancelJob({missing}));
  EXPECT_EQ(not_found.code(), StatusCode::kNotFound);
  EXPECT_EQ(not_found.message(), "Job " + missing + " does not exist");
  EXPECT_EQ(StatusOf(jobs_->CancelJob({"%' OR 1=1 --"})).code(), StatusCode::kNotFound);
  EXPECT_EQ(jobs_->GetJob("not a uuid").status().code(), StatusCode::kNotFound);
}

// A running job's row belongs to its worker: a cancel records a request for its attempt, which the node that
// runs it reads (CancelRequestsFor); the attempt then ends frozen unless it succeeds.
TEST_P(JobsTest, CancelOfARunningJobRequestsItsAttemptToStop) {
  const std::string id = Enqueue(Job("k"));
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  const std::string token = claimed[0].attempt_token.value_or("");
  auto requested = jobs_->CancelJob({id});
  OCTOP_ASSERT_OK(requested);
  EXPECT_EQ(*requested, CancelJobResult::kStopRequested);
  const JobInfo running = Get(id);
  EXPECT_EQ(running.status, JobStatus::kRunning) << "the worker's row is not written";
  EXPECT_EQ(running.attempt_token, claimed[0].attempt_token);
  auto again = jobs_->CancelJob({id});  // asking twice is asking once
  OCTOP_ASSERT_OK(again);
  EXPECT_EQ(*again, CancelJobResult::kStopRequested);
  auto ids = jobs_->CancelRequestsFor({"some-other-token", token});
  OCTOP_ASSERT_OK(ids);
  EXPECT_EQ(*ids, std::vector<std::string>{id});
  auto others = jobs_->CancelRequestsFor({"some-other-token"});
  OCTOP_ASSERT_OK(others);
  EXPECT_TRUE(others->empty());

  // The handler gave up with a retryable error: a cancelled job does not wait for a retry.
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kRetry, "interrupted", minutes(1)));
  const JobInfo frozen = Get(id);
  EXPECT_EQ(frozen.status, JobStatus::kFrozen);
  EXPECT_EQ(frozen.last_error, std::optional<std::string>(std::string(kJobCancelledError)));
  EXPECT_TRUE(frozen.completed_at.has_value());
  clock_.Advance(minutes(2));
  EXPECT_TRUE(Claim().empty());
  auto ended = jobs_->CancelRequestsFor({token});
  OCTOP_ASSERT_OK(ended);
  EXPECT_TRUE(ended->empty()) << "a request ends with its attempt";

  // The request named that attempt: after a manual retry the next attempt fails as any other does.
  OCTOP_ASSERT_OK(jobs_->RetryJob({id}));
  auto second = Claim();
  ASSERT_EQ(second.size(), 1u);
  ASSERT_TRUE(Complete(second[0], JobOutcome::kFail, "boom", minutes(1)));
  EXPECT_EQ(Get(id).status, JobStatus::kFailed);
  EXPECT_EQ(Get(id).last_error, std::optional<std::string>("boom"));
}

TEST_P(JobsTest, ACancelledAttemptThatSucceedsOrIsHandedBack) {
  const std::string done = Enqueue(Job("done"));
  const std::string held = Enqueue(Job("held"));
  auto claimed = Claim(2);
  ASSERT_EQ(claimed.size(), 2u);
  for (const JobInfo& job : claimed) OCTOP_ASSERT_OK(jobs_->CancelJob({job.id}));
  for (const JobInfo& job : claimed) {
    if (job.id == done) {
      ASSERT_TRUE(Complete(job, JobOutcome::kSuccess));  // it finished before it heard: a success
    } else {
      ASSERT_TRUE(Complete(job, JobOutcome::kRelease, "released"));  // prefetched, never started
    }
  }
  EXPECT_EQ(Get(done).status, JobStatus::kSuccess);
  EXPECT_EQ(Get(done).last_error, std::nullopt);
  const JobInfo released = Get(held);
  EXPECT_EQ(released.status, JobStatus::kFrozen) << "handed back under a request: it does not wait again";
  EXPECT_EQ(released.last_error, std::optional<std::string>(std::string(kJobCancelledError)));
  EXPECT_TRUE(Claim().empty());
}

TEST_P(JobsTest, AnExpiredAttemptAskedToStopIsFrozenByTheRescuer) {
  JobSpec retryable = Job("k");
  retryable.max_retries = 5;
  const std::string asked = Enqueue(retryable);
  const std::string lost = Enqueue(retryable);
  auto claimed = Claim(2, "default", {}, seconds(10));
  ASSERT_EQ(claimed.size(), 2u);
  OCTOP_ASSERT_OK(jobs_->CancelJob({asked}));
  clock_.Advance(seconds(11));
  auto rescued = jobs_->RescueExpiredJobs({});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 2u);
  std::map<std::string, RescuedJob> by_id;
  for (const RescuedJob& r : *rescued) by_id[r.id] = r;
  EXPECT_EQ(by_id[asked].status, JobStatus::kFrozen);
  EXPECT_EQ(by_id[lost].status, JobStatus::kFailed);
  EXPECT_EQ(Get(asked).last_error, std::optional<std::string>(std::string(kJobCancelledError)));
  EXPECT_EQ(Get(lost).last_error, std::optional<std::string>(std::string(kJobTimedOutError)));
}

TEST_P(JobsTest, ARequestWhoseAttemptEndedIsDroppedByTheNextCancel) {
  const std::string first = Enqueue(Job("k"));
  auto a = Claim(1);
  ASSERT_EQ(a.size(), 1u);
  OCTOP_ASSERT_OK(jobs_->CancelJob({first}));
  ASSERT_TRUE(Complete(a[0], JobOutcome::kSuccess));
  const std::string second = Enqueue(Job("k"));
  auto b = Claim(1);
  ASSERT_EQ(b.size(), 1u);
  OCTOP_ASSERT_OK(jobs_->CancelJob({second}));
  std::vector<std::vector<std::optional<std::string>>> rows;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    auto r = tx.Execute("SELECT job_id FROM octop_job_cancels", {});
    if (!r.ok()) return r.status();
    rows = r->rows;
    return Status::Ok();
  }));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], std::optional<std::string>(second));
}

// ---- Queues -----------------------------------------------------------------------------------------------

TEST_P(JobsTest, PauseStopsClaimsAndResumeRestoresThem) {
  JobSpec a = Job("k");
  a.queue = "a";
  JobSpec b = Job("k");
  b.queue = "b";
  Enqueue(a);
  Enqueue(b);
  OCTOP_ASSERT_OK(jobs_->SetQueuePaused("a", true));
  EXPECT_TRUE(Claim(10, "a").empty());
  EXPECT_EQ(Claim(10, "b").size(), 1u) << "other queues are not paused";
  OCTOP_ASSERT_OK(jobs_->EnqueueJobs({a}));  // enqueue still works while paused
  auto queues = jobs_->ListQueues();
  OCTOP_ASSERT_OK(queues);
  ASSERT_EQ(queues->size(), 1u) << "only queues with a pause record";
  EXPECT_EQ((*queues)[0].name, "a");
  EXPECT_TRUE((*queues)[0].paused);
  OCTOP_ASSERT_OK(jobs_->SetQueuePaused("a", false));
  EXPECT_EQ(Claim(10, "a").size(), 2u);
  OCTOP_ASSERT_OK(jobs_->SetQueuePaused("empty", true));
  queues = jobs_->ListQueues();
  OCTOP_ASSERT_OK(queues);
  ASSERT_EQ(queues->size(), 2u) << "a paused queue without jobs is listed";
  EXPECT_EQ((*queues)[0].name, "a");
  EXPECT_FALSE((*queues)[0].paused) << "resumed";
  EXPECT_EQ((*queues)[1].name, "empty");
  EXPECT_TRUE((*queues)[1].paused);
  EXPECT_EQ(jobs_->SetQueuePaused("", true).code(), StatusCode::kInvalidArgument);
}

TEST_P(JobsTest, NextJobDueAtIsTheEarliestWaitingJob) {
  auto none = jobs_->NextJobDueAt("default");
  OCTOP_ASSERT_OK(none);
  EXPECT_EQ(*none, std::nullopt);
  JobSpec later = Job("k");
  later.scheduled_at = clock_.WallNow() + minutes(5);
  Enqueue(later);
  later.scheduled_at = clock_.WallNow() + minutes(2);
  Enqueue(later);
  auto next = jobs_->NextJobDueAt("default");
  OCTOP_ASSERT_OK(next);
  EXPECT_EQ(Show(*next), Show(t0() + minutes(2)));
}

// ---- Listing, summary, views ------------------------------------------------------------------------------

TEST_P(JobsTest, ListJobsFiltersAndPagesNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    JobSpec job = Job(i % 2 == 0 ? "even" : "odd");
    job.queue = i < 4 ? "q" : "other";
    ids.push_back(Enqueue(job));
    clock_.Advance(seconds(1));
  }
  auto all = jobs_->ListJobs({});
  OCTOP_ASSERT_OK(all);
  ASSERT_EQ(all->size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ((*all)[i].id, ids[4 - i]);
  auto evens = jobs_->ListJobs({.queue = "q", .kind = "even"});
  OCTOP_ASSERT_OK(evens);
  ASSERT_EQ(evens->size(), 2u);
  EXPECT_EQ((*evens)[0].id, ids[2]);
  EXPECT_EQ((*evens)[1].id, ids[0]);
  auto page = jobs_->ListJobs({.limit = 2, .offset = 2});
  OCTOP_ASSERT_OK(page);
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, ids[2]);
  EXPECT_EQ((*page)[1].id, ids[1]);
  auto running = jobs_->ListJobs({.status = JobStatus::kRunning});
  OCTOP_ASSERT_OK(running);
  EXPECT_TRUE(running->empty());
  EXPECT_EQ(jobs_->ListJobs({.limit = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->ListJobs({.limit = 1001}).status().code(), StatusCode::kInvalidArgument);
}

// A listing carries payloads newest first until their bytes would pass the budget; the rest come without,
// with their size.
TEST_P(JobsTest, ListJobsLeavesOutPayloadsPastItsByteBudget) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    JobSpec job = Job("k");
    job.payload = "\"" + std::string(100, static_cast<char>('a' + i)) + "\"";  // 102 bytes
    ids.push_back(Enqueue(job));
    clock_.Advance(seconds(1));
  }
  auto some = jobs_->ListJobs({.limit = 10, .payload_budget = 250});
  OCTOP_ASSERT_OK(some);
  ASSERT_EQ(some->size(), 3u);
  EXPECT_EQ((*some)[0].id, ids[2]);
  EXPECT_EQ((*some)[0].payload, "\"" + std::string(100, 'c') + "\"");
  EXPECT_EQ((*some)[0].omitted_payload_bytes, std::nullopt);
  EXPECT_EQ((*some)[1].omitted_payload_bytes, std::nullopt);
  EXPECT_EQ((*some)[2].id, ids[0]);
  EXPECT_EQ((*some)[2].payload, "");
  EXPECT_EQ((*some)[2].omitted_payload_bytes, 102);
  auto none = jobs_->ListJobs({.limit = 10, .payload_budget = 0});
  OCTOP_ASSERT_OK(none);
  for (const JobInfo& job : *none) EXPECT_EQ(job.omitted_payload_bytes, 102) << job.id;
  auto all = jobs_->ListJobs({.limit = 10});
  OCTOP_ASSERT_OK(all);
  for (const JobInfo& job : *all) EXPECT_EQ(job.omitted_payload_bytes, std::nullopt) << job.id;
  // A page past the budgeted one counts its own bytes.
  auto page = jobs_->ListJobs({.limit = 1, .offset = 2, .payload_budget = 150});
  OCTOP_ASSERT_OK(page);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].omitted_payload_bytes, std::nullopt);
}

TEST_P(JobsTest, SummaryCountsOldestAndAverageDelay) {
  // Two pending jobs due 60 s and 20 s ago, one due in the future: waiting delay = avg(60, 20) = 40 s.
  for (int ago : {60, 20, -30}) {
    JobSpec job = Job("k");
    job.scheduled_at = t0() - seconds(ago);
    Enqueue(job);
  }
  // In queue "q": two jobs scheduled at t0, started at t0+4 s and t0+10 s and succeeded: pickup delay 7 s.
  JobSpec q = Job("k");
  q.queue = "q";
  Enqueue(q);
  Enqueue(q);
  clock_.Advance(seconds(4));
  auto one = Claim(1, "q");
  ASSERT_EQ(one.size(), 1u);
  clock_.Advance(seconds(6));
  auto two = Claim(1, "q");
  ASSERT_EQ(two.size(), 1u);
  ASSERT_TRUE(Complete(one[0], JobOutcome::kSuccess));
  ASSERT_TRUE(Complete(two[0], JobOutcome::kSuccess));
  auto summary = jobs_->SummarizeJobs();
  OCTOP_ASSERT_OK(summary);
  ASSERT_EQ(summary->size(), 2u);
  const JobStatusCount& pending = (*summary)[0];
  EXPECT_EQ(pending.queue, "default");
  EXPECT_EQ(pending.status, JobStatus::kPending);
  EXPECT_EQ(pending.count, 3);
  EXPECT_EQ(Show(pending.oldest_scheduled_at), Show(t0() - seconds(60)));
  ASSERT_TRUE(pending.average_delay.has_value());
  // Now is t0 + 10 s: the due ones waited 70 s and 30 s.
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(*pending.average_delay).count(), 50000);
  const JobStatusCount& success = (*summary)[1];
  EXPECT_EQ(success.queue, "q");
  EXPECT_EQ(success.status, JobStatus::kSuccess);
  EXPECT_EQ(success.count, 2);
  ASSERT_TRUE(success.average_delay.has_value());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(*success.average_delay).count(), 7000);
  // Over an hour later the started ones no longer count towards the delay.
  clock_.Advance(hours(2));
  summary = jobs_->SummarizeJobs();
  OCTOP_ASSERT_OK(summary);
  ASSERT_EQ(summary->size(), 2u);
  EXPECT_EQ((*summary)[1].count, 2);
  EXPECT_EQ((*summary)[1].average_delay, std::nullopt);
}

TEST_P(JobsTest, SummaryViewAndFailedJobsViewExist) {
  for (int i = 0; i < 3; ++i) Enqueue(Job("k"));
  JobSpec zero = Job("doomed");
  zero.max_retries = 0;
  Enqueue(zero);
  auto claimed = Claim(10, "default", {"doomed"});
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "bad"));
  std::vector<std::vector<std::optional<std::string>>> summary_rows, failed_rows;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    auto s = tx.Execute("SELECT status, count FROM octop_job_summary WHERE queue = $1 ORDER BY status",
                        {"default"});
    if (!s.ok()) return s.status();
    summary_rows = s->rows;
    auto f = tx.Execute("SELECT kind, last_error FROM octop_failed_jobs ORDER BY failed_at DESC", {});
    if (!f.ok()) return f.status();
    failed_rows = f->rows;
    return Status::Ok();
  }));
  ASSERT_EQ(summary_rows.size(), 2u);
  EXPECT_EQ(summary_rows[0][0], std::optional<std::string>("frozen"));
  EXPECT_EQ(summary_rows[0][1], std::optional<std::string>("1"));
  EXPECT_EQ(summary_rows[1][0], std::optional<std::string>("pending"));
  EXPECT_EQ(summary_rows[1][1], std::optional<std::string>("3"));
  ASSERT_EQ(failed_rows.size(), 1u);
  EXPECT_EQ(failed_rows[0][0], std::optional<std::string>("doomed"));
  EXPECT_EQ(failed_rows[0][1], std::optional<std::string>("bad"));
}

TEST_P(JobsTest, ListFailedJobsNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    JobSpec job = Job("k" + std::to_string(i));
    job.max_retries = i == 1 ? 5 : 0;  // k1 stays 'failed' (awaiting retry), the others freeze
    ids.push_back(Enqueue(job));
  }
  Enqueue(Job("fine"));
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(1));
    auto claimed = Claim(1, "default", {"k" + std::to_string(i)});
    ASSERT_EQ(claimed.size(), 1u);
    ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "e" + std::to_string(i), hours(1)));
  }
  auto failed = jobs_->ListFailedJobs({});
  OCTOP_ASSERT_OK(failed);
  ASSERT_EQ(failed->size(), 3u);
  EXPECT_EQ((*failed)[0].id, ids[2]);
  EXPECT_EQ((*failed)[1].id, ids[1]);
  EXPECT_EQ((*failed)[1].status, JobStatus::kFailed);
  EXPECT_EQ((*failed)[2].id, ids[0]);
  EXPECT_EQ((*failed)[2].status, JobStatus::kFrozen);
  auto limited = jobs_->ListFailedJobs({.limit = 1});
  OCTOP_ASSERT_OK(limited);
  ASSERT_EQ(limited->size(), 1u);
  EXPECT_EQ(limited->front().id, ids[2]);
}

// ---- Config and retention ---------------------------------------------------------------------------------

TEST_P(JobsTest, ConfigGetSetList) {
  auto missing = jobs_->GetConfig("queue.poll_interval");
  OCTOP_ASSERT_OK(missing);
  EXPECT_EQ(*missing, std::nullopt);
  OCTOP_ASSERT_OK(jobs_->SetConfig("queue.poll_interval", R"({"value": 5})"));
  clock_.Advance(seconds(1));
  OCTOP_ASSERT_OK(jobs_->SetConfig("queue.poll_interval", R"({"value": 2})"));
  OCTOP_ASSERT_OK(jobs_->SetConfig("job.default_timeout", R"("PT5M")"));
  auto value = jobs_->GetConfig("queue.poll_interval");
  OCTOP_ASSERT_OK(value);
  ASSERT_TRUE(value->has_value());
  EXPECT_EQ(nlohmann::json::parse(**value), nlohmann::json::parse(R"({"value": 2})"));
  EXPECT_EQ(jobs_->SetConfig("k", "{bad").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs_->SetConfig("", "1").code(), StatusCode::kInvalidArgument);
  auto all = admin().ListConfig();
  OCTOP_ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key, "job.default_timeout");
  EXPECT_EQ((*all)[1].key, "queue.poll_interval");
  EXPECT_EQ(Show((*all)[1].updated_at), Show(t0() + seconds(1)));
}

TEST_P(JobsTest, DeleteFinishedJobsKeepsRecentAndUnfinished) {
  Enqueue(Job("pending"));
  const std::string old_success = Enqueue(Job("old"));
  JobSpec doomed = Job("doomed");
  doomed.max_retries = 0;
  const std::string old_frozen = Enqueue(doomed);
  auto claimed = Claim(10, "default", {"old", "doomed"});
  ASSERT_EQ(claimed.size(), 2u);
  for (const JobInfo& j : claimed)
    ASSERT_TRUE(Complete(j, JobOutcome::kFail, "x"));  // "old" has retries left
  auto again = Claim(10, "default", {"old"});
  ASSERT_EQ(again.size(), 1u);
  ASSERT_TRUE(Complete(again[0], JobOutcome::kSuccess));
  clock_.Advance(hours(48));
  const std::string recent = Enqueue(Job("recent"));
  auto recent_claim = Claim(10, "default", {"recent"});
  ASSERT_EQ(recent_claim.size(), 1u);
  ASSERT_TRUE(Complete(recent_claim[0], JobOutcome::kSuccess));
  EXPECT_EQ(jobs_->DeleteFinishedJobs({.statuses = {JobStatus::kPending}}).status().code(),
            StatusCode::kInvalidArgument);
  auto deleted = jobs_->DeleteFinishedJobs({.older_than = hours(24), .limit = 1});
  OCTOP_ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  deleted = jobs_->DeleteFinishedJobs({.older_than = hours(24)});
  OCTOP_ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(jobs_->GetJob(old_success).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(jobs_->GetJob(old_frozen).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Get(recent).status, JobStatus::kSuccess);
  EXPECT_EQ(Count(JobStatus::kPending), 1);
}

// ---- Transactional enqueue and notifications --------------------------------------------------------------

const char* CreateOrders(std::string_view backend) {
  (void)backend;
  return "CREATE TABLE IF NOT EXISTS test_orders (id integer PRIMARY KEY, note text)";
}

// Jobs written by SQL: `status` is the one source of a job's state, so a job INSERTed by plain
// SQL is registered (at once), and a DBA's UPDATE of its status retries or stops it and an UPDATE of
// scheduled_at moves it (once the store has reconciled them: the job queue does every reconcile_interval). On
// PostgreSQL the claimable set and the live keys are tables of their own (docs/store.md §8.5): a trigger
// registers inserted jobs, ReconcileJobSets the rest (docs/jobs.md "Jobs written by SQL"). SQLite reads
// octop_jobs itself.
TEST_P(JobsTest, JobsWrittenByPlainSqlAreClaimedRetriedMovedAndStoppedAsTheirStatusSays) {
  const bool pg = GetParam().is_postgres();
  const std::string past = pg ? "2000-01-01 00:00:00+00" : "2000-01-01 00:00:00.000";
  const std::string later = pg ? "2099-01-01 00:00:00+00" : "2099-01-01 00:00:00.000";
  const std::string a = "00000000-0000-7000-8000-00000000000a";
  const std::string b = "00000000-0000-7000-8000-00000000000b";
  // An enqueue through the store of a job with the key the SQL-written jobs use.
  auto enqueue_keyed = [&] {
    JobSpec j = Job("k");
    j.unique_key = "sql-key";
    return jobs_->EnqueueJobs({j});
  };
  const std::string insert =
      "INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, "
      "max_retries, "
      "created_at, unique_key) VALUES ($1, 'default', 'by-sql', '{\"n\":1}', 0, $2, 'pending', 0, 0, $2, $3)";
  // Registered by an INSERT: claimed like any other job, and its unique key is held.
  OCTOP_ASSERT_OK(Sql(insert, {a, past, std::optional<std::string>("sql-key")}));
  auto keyed = enqueue_keyed();
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_TRUE(keyed->front().existing) << "the key of a job inserted by SQL was not held";
  EXPECT_EQ(keyed->front().id, a);
  auto claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u) << "a job inserted by SQL was not claimed";
  EXPECT_EQ(claimed[0].id, a);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kFail, "boom"));
  EXPECT_EQ(Get(a).status, JobStatus::kFrozen);
  // Retried by the DBA's one UPDATE: claimed again, the key taken again.
  OCTOP_ASSERT_OK(Sql("UPDATE octop_jobs SET status = 'pending', max_retries = 1 WHERE id = $1", {a}));
  OCTOP_ASSERT_OK(jobs_->ReconcileJobSets());
  claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u) << "a job set back to pending by SQL was not claimed";
  EXPECT_EQ(claimed[0].attempt, 2);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));
  EXPECT_TRUE(Claim().empty());

  // Moved by an UPDATE of scheduled_at: not due until then.
  const std::string id = Enqueue(Job("k"));
  OCTOP_ASSERT_OK(Sql("UPDATE octop_jobs SET scheduled_at = $2 WHERE id = $1", {id, later}));
  OCTOP_ASSERT_OK(jobs_->ReconcileJobSets());
  EXPECT_TRUE(Claim().empty()) << "a job moved to 2099 by SQL was claimed now";
  OCTOP_ASSERT_OK(Sql("UPDATE octop_jobs SET scheduled_at = $2 WHERE id = $1", {id, past}));
  OCTOP_ASSERT_OK(jobs_->ReconcileJobSets());
  claimed = Claim();
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));

  // Stopped by an UPDATE to frozen: never claimed, and its key is free for a new job.
  OCTOP_ASSERT_OK(Sql(insert, {b, past, std::optional<std::string>("sql-key")}));
  OCTOP_ASSERT_OK(Sql("UPDATE octop_jobs SET status = 'frozen' WHERE id = $1", {b}));
  OCTOP_ASSERT_OK(jobs_->ReconcileJobSets());
  EXPECT_TRUE(Claim().empty()) << "a job frozen by SQL was claimed";
  auto fresh = enqueue_keyed();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_FALSE(fresh->front().existing) << "a job frozen by SQL kept its unique key";
  // A second live job with a held key is refused by the database, as the unique index refused it before.
  EXPECT_FALSE(
      Sql(insert, {"00000000-0000-7000-8000-00000000000c", past, std::optional<std::string>("sql-key")})
          .ok());
  // Deleted by SQL: its key is free again, and nothing is left to reconcile.
  OCTOP_ASSERT_OK(Sql("DELETE FROM octop_jobs WHERE id = $1", {fresh->front().id}));
  OCTOP_ASSERT_OK(jobs_->ReconcileJobSets());
  auto after_delete = enqueue_keyed();
  ASSERT_TRUE(after_delete.ok()) << after_delete.status().ToString();
  EXPECT_FALSE(after_delete->front().existing) << "a job deleted by SQL kept its unique key";
  auto again = jobs_->ReconcileJobSets();
  OCTOP_ASSERT_OK(again);
  EXPECT_EQ(*again, 0) << "octop's own writes left something to reconcile";
}

// A job INSERTed by plain SQL after a transactional enqueue, in the same transaction, is registered at once
// as any other: the enqueue's own switch-off of the INSERT trigger ends with the enqueue.
TEST_P(JobsTest, AJobInsertedBySqlAfterATransactionalEnqueueIsClaimableAtOnce) {
  const bool pg = GetParam().is_postgres();
  const std::string id = "00000000-0000-7000-8000-0000000000e1";
  std::string enqueued;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    auto out = tx.EnqueueJobs({Job("k")});
    OCTOP_RETURN_IF_ERROR(out.status());
    enqueued = out->front().id;
    return tx
        .Execute(
            std::string("INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, "
                        "attempt, max_retries, created_at) VALUES ($1, 'default', 'by-sql', '{}', 0, $2, "
                        "'pending', 0, 0, $2)"),
            {id, pg ? "2000-01-01 00:00:00+00" : "2000-01-01 00:00:00.000"})
        .status();
  }));
  std::vector<std::string> ids;
  for (const JobInfo& job : Claim()) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> expected{id, enqueued};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected) << "the job INSERTed after the enqueue waited for a reconcile pass";
}

// The reconcile is asked for by a notification: a statement of plain SQL that UPDATEs or DELETEs jobs sends
// one on commit; none of octop's own operations does (they keep the working sets in step themselves). The
// notifications of one listener arrive in commit order, so a job INSERTed by SQL last (its queue's wake-up)
// marks the end of octop's operations: a change notification before it would be one of theirs.
TEST_P(JobsTest, PlainSqlChangesOfJobsAreNotifiedAndOctopsOwnWritesAreNot) {
  if (!GetParam().is_postgres())
    GTEST_SKIP() << "SQLite's claims read octop_jobs: there is nothing to reconcile";
  auto listener = jobs_->Listen({std::string(kJobsChannel), std::string(kJobsChangedChannel)});
  OCTOP_ASSERT_OK(listener);
  // Notifications up to the first `until` returns true for (deadline 10 s); false if it never came.
  std::vector<Notification> seen;
  auto wait_for = [&](const std::function<bool(const Notification&)>& until) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto got = (*listener)->Wait(milliseconds(500), {});
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok()) return false;
      for (const Notification& n : *got) {
        seen.push_back(n);
        if (until(n)) return true;
      }
    }
    return false;
  };
  auto changes = [&] {
    return std::count_if(seen.begin(), seen.end(),
                         [](const Notification& n) { return n.channel == kJobsChangedChannel; });
  };

  // Every operation of octop that writes octop_jobs.
  auto enqueued = jobs_->EnqueueJobs({Job("k"), Job("k"), Job("k"), Job("k"), Job("k")});
  OCTOP_ASSERT_OK(enqueued);
  auto claimed = Claim(3, "default", {}, seconds(10));
  ASSERT_EQ(claimed.size(), 3u);
  ASSERT_TRUE(Complete(claimed[0], JobOutcome::kSuccess));                   // the plain-success statement
  ASSERT_TRUE(Complete(claimed[1], JobOutcome::kFail, "boom", seconds(0)));  // the general one
  ASSERT_TRUE(Complete(claimed[2], JobOutcome::kRelease));
  auto renewing = Claim(1, "default", {}, seconds(10));
  ASSERT_EQ(renewing.size(), 1u);
  auto renewed = jobs_->RenewJobLeases({{*renewing[0].attempt_token}, seconds(10)});
  OCTOP_ASSERT_OK(renewed);
  clock_.Advance(seconds(11));
  auto rescued = jobs_->RescueExpiredJobs({.backoff_base = seconds(0), .backoff_max = seconds(0)});
  OCTOP_ASSERT_OK(rescued);
  EXPECT_EQ(rescued->size(), 1u);
  auto running = Claim(1);
  ASSERT_EQ(running.size(), 1u);
  auto stop = jobs_->CancelJob({running[0].id});
  OCTOP_ASSERT_OK(stop);
  EXPECT_EQ(*stop, CancelJobResult::kStopRequested);
  JobSpec keyed = Job("k");  // enqueued now, so that no claim above took it
  keyed.unique_key = "key";
  const std::string waiting = Enqueue(keyed);
  auto cancelled = jobs_->CancelJob({waiting});
  OCTOP_ASSERT_OK(cancelled);
  EXPECT_EQ(*cancelled, CancelJobResult::kCancelled);
  OCTOP_ASSERT_OK(jobs_->RetryJob({waiting}));
  clock_.Advance(hours(24 * 30));
  auto deleted = jobs_->DeleteFinishedJobs({.older_than = hours(1)});
  OCTOP_ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  OCTOP_ASSERT_OK(
      jobs_->WithTransaction([&](Transaction& tx) { return tx.EnqueueJobs({Job("k")}).status(); }));
  // The mark: a job INSERTed by SQL into a queue of its own; its trigger wakes that queue.
  const std::string insert =
      "INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, "
      "max_retries, "
      "created_at) VALUES ($1, $2, 'by-sql', '{}', 0, now(), 'pending', 0, 0, now())";
  OCTOP_ASSERT_OK(Sql(insert, {"00000000-0000-7000-8000-0000000000c1", "mark"}));
  ASSERT_TRUE(
      wait_for([](const Notification& n) { return n.channel == kJobsChannel && n.payload == "mark"; }));
  EXPECT_EQ(changes(), 0) << "one of octop's own operations notified a change by SQL";

  // A DBA's retry by UPDATE, a DELETE, and an UPDATE in a transaction that enqueued through octop first (its
  // setting turns off the INSERT trigger only): each is notified.
  auto is_change = [](const Notification& n) { return n.channel == kJobsChangedChannel; };
  OCTOP_ASSERT_OK(Sql("UPDATE octop_jobs SET status = 'pending' WHERE id = $1", {running[0].id}));
  EXPECT_TRUE(wait_for(is_change)) << "a plain SQL UPDATE was not notified";
  OCTOP_ASSERT_OK(Sql("DELETE FROM octop_jobs WHERE id = $1", {(*enqueued)[4].id}));
  EXPECT_TRUE(wait_for(is_change)) << "a plain SQL DELETE was not notified";
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.EnqueueJobs({Job("k")}).status());
    return tx.Execute("UPDATE octop_jobs SET priority = 5 WHERE id = $1", {running[0].id}).status();
  }));
  EXPECT_TRUE(wait_for(is_change)) << "an UPDATE after EnqueueTx in its transaction was not notified";
  EXPECT_EQ(changes(), 3);
}

// ReconcileJobSets repairs only what SQL wrote: every octop operation keeps the working sets in step in the
// statement that changes a job, so a reconcile running beside enqueues (keyed and not), claims, successes,
// failures with retries, hand-backs, cancels and manual retries on three nodes finds nothing to write.
TEST_P(JobsTest, ReconcileFindsNothingToWriteWhileOctopsOwnOperationsRun) {
  constexpr int kThreads = 3;
  constexpr int kRounds = 40;
  auto nodes = Nodes(kThreads + 1);
  for (const auto& n : nodes) ASSERT_NE(n, nullptr);
  std::atomic<bool> done{false};
  std::atomic<long> reconciled{0};
  std::atomic<long> passes{0};
  std::mutex mu;
  std::vector<std::string> errors;
  auto note = [&](const Status& s) {
    if (s.ok()) return;
    std::lock_guard lock(mu);
    errors.push_back(s.ToString());
  };
  std::jthread reconciler([&] {
    while (!done.load()) {
      auto r = nodes[kThreads]->ReconcileJobSets();
      note(r.status());
      if (r.ok()) reconciled += *r;
      ++passes;
    }
  });
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&, t] {
        JobStore& node = *nodes[static_cast<std::size_t>(t)];
        for (int r = 0; r < kRounds; ++r) {
          std::vector<JobSpec> batch = {Job("k"), Job("k"), Job("k")};
          batch[0].unique_key = "key-" + std::to_string(t) + "-" + std::to_string(r % 5);
          auto enqueued = node.EnqueueJobs(batch);
          note(enqueued.status());
          auto claimed = node.ClaimJobs({.limit = 4, .worker_id = "w" + std::to_string(t)});
          note(claimed.status());
          if (!claimed.ok()) continue;
          std::vector<JobCompletion> ends;
          for (std::size_t i = 0; i < claimed->size(); ++i) {
            const JobInfo& job = (*claimed)[i];
            const JobOutcome outcome =
                std::array{JobOutcome::kSuccess, JobOutcome::kFail, JobOutcome::kRelease,
                           JobOutcome::kCancel}[(i + static_cast<std::size_t>(r)) % 4];
            ends.push_back(
                {.id = job.id,
                 .attempt_token = job.attempt_token.value_or(""),
                 .outcome = outcome,
                 .error = outcome == JobOutcome::kFail ? std::optional<std::string>("boom") : std::nullopt});
          }
          if (!ends.empty()) note(node.CompleteJobs(ends).status());
          if (enqueued.ok() && r % 4 == 1) {
            // A waiting job cancelled, then retried by hand.
            const std::string id = enqueued->back().id;
            auto cancelled = node.CancelJob({id});
            if (cancelled.ok()) {
              const Status retried = node.RetryJob({id});
              if (retried.code() != StatusCode::kConflict) note(retried);
            } else if (cancelled.status().code() != StatusCode::kConflict) {
              note(cancelled.status());
            }
          }
        }
      });
    }
  }
  done = true;
  reconciler.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_GT(passes.load(), 0);
  EXPECT_EQ(reconciled.load(), 0) << "a reconcile found octop's own writes out of step";
}

TEST_P(JobsTest, TransactionCommitsCallerRowsAndJobsTogether) {
  std::string id;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.Execute(CreateOrders(tx.backend()), {}).status());
    auto inserted = tx.Execute("INSERT INTO test_orders (id, note) VALUES ($1, $2)", {"1", "it's 100%"});
    if (!inserted.ok()) return inserted.status();
    if (inserted->affected_rows != 1) return InternalError("expected one inserted row");
    auto jobs = tx.EnqueueJobs({Job("order.created", R"({"order":1})")});
    if (!jobs.ok()) return jobs.status();
    id = jobs->front().id;
    return Status::Ok();
  }));
  EXPECT_EQ(Get(id).kind, "order.created");
  std::vector<std::vector<std::optional<std::string>>> rows;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    auto r = tx.Execute("SELECT id, note FROM test_orders WHERE id = $1", {"1"});
    if (!r.ok()) return r.status();
    rows = r->rows;
    return Status::Ok();
  }));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1], std::optional<std::string>("it's 100%"));
}

TEST_P(JobsTest, TransactionRollbackLeavesNoJobAndNoRow) {
  OCTOP_ASSERT_OK(jobs_->WithTransaction(
      [&](Transaction& tx) { return tx.Execute(CreateOrders(tx.backend()), {}).status(); }));
  Status status = jobs_->WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(
        tx.Execute("INSERT INTO test_orders (id, note) VALUES ($1, $2)", {"7", "x"}).status());
    OCTOP_RETURN_IF_ERROR(tx.EnqueueJobs({Job("order.created")}).status());
    return CancelledError("the caller changed its mind");
  });
  EXPECT_EQ(status.code(), StatusCode::kCancelled);
  EXPECT_EQ(Count(), 0);
  long orders = -1;
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    auto r = tx.Execute("SELECT count(*) FROM test_orders", {});
    if (!r.ok()) return r.status();
    orders = std::stol(r->rows.at(0).at(0).value_or("-1"));
    return Status::Ok();
  }));
  EXPECT_EQ(orders, 0);
}

TEST_P(JobsTest, TransactionWithAFailedStatementRollsBackEvenIfTheCallbackIgnoresIt) {
  Status status = jobs_->WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.EnqueueJobs({Job("k")}).status());
    auto bad = tx.Execute("SELECT * FROM no_such_table_here", {});
    EXPECT_FALSE(bad.ok());
    auto after = tx.EnqueueJobs({Job("k")});
    EXPECT_FALSE(after.ok()) << "a failed transaction accepts nothing more";
    return Status::Ok();
  });
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(Count(), 0);
  // Parameters are counted, never interpolated.
  Status mismatch = jobs_->WithTransaction(
      [&](Transaction& tx) -> Status { return tx.Execute("SELECT $1, $2", {"only one"}).status(); });
  EXPECT_FALSE(mismatch.ok());
}

TEST_P(JobsTest, EnqueueNotifiesTheQueueOnlyOnCommit) {
  auto listener = jobs_->Listen({std::string(kJobsChannel)});
  OCTOP_ASSERT_OK(listener);
  auto node = OpenJobNode();
  ASSERT_NE(node, nullptr);
  JobSpec rolled_back = Job("k");
  rolled_back.queue = "never";
  EXPECT_FALSE(node->WithTransaction([&](Transaction& tx) -> Status {
                     OCTOP_RETURN_IF_ERROR(tx.EnqueueJobs({rolled_back}).status());
                     return CancelledError("no");
                   })
                   .ok());
  JobSpec committed = Job("k");
  committed.queue = "mail";
  OCTOP_ASSERT_OK(
      node->WithTransaction([&](Transaction& tx) { return tx.EnqueueJobs({committed}).status(); }));
  JobSpec direct = Job("k");
  direct.queue = "reports";
  OCTOP_ASSERT_OK(node->EnqueueJobs({direct, direct}));
  std::vector<std::string> payloads;
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (payloads.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    auto got = (*listener)->Wait(milliseconds(500), {});
    OCTOP_ASSERT_OK(got);
    for (const Notification& n : *got) {
      EXPECT_EQ(n.channel, kJobsChannel);
      payloads.push_back(n.payload);
    }
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"mail", "reports"}))
      << "one notification per queue, none for the rolled-back enqueue";
}

TEST_P(JobsTest, MigrationRecordsTheJobQueueStep) {
  auto names = admin().AppliedMigrations(MigrationLine::kJobs);
  OCTOP_ASSERT_OK(names);
  ASSERT_FALSE(names->empty());
  EXPECT_EQ(names->back(), std::end(kJobMigrationNames)[-1]);
  auto queues = admin().DescribeTable("octop_queues");
  OCTOP_ASSERT_OK(queues);
  ASSERT_EQ(queues->size(), 3u);
  EXPECT_EQ((*queues)[0].name, "name");
  EXPECT_TRUE((*queues)[0].primary_key);
  // Unique keys of live jobs: a table of their own on PostgreSQL, a partial unique index on SQLite.
  bool unique_index = false;
  auto indexes = admin().DescribeIndexes(GetParam().is_postgres() ? "octop_job_keys" : "octop_jobs");
  OCTOP_ASSERT_OK(indexes);
  for (const IndexInfo& index : *indexes) {
    if (index.columns == std::vector<std::string>{"unique_key"}) unique_index = index.unique;
  }
  EXPECT_TRUE(unique_index);
}

}  // namespace
}  // namespace octop::store::testing
