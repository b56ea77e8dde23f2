// The chaos test's invariant checks on hand-made histories: each check passes a clean history and flags the
// violation it exists for (so a chaos run that reports PASS has checks that can fail).
#include "run_log_checks.h"

#include <gtest/gtest.h>

namespace octop::chaos {
namespace {

Run TaskRun(const std::string& node, const std::string& id, double start, std::optional<double> end) {
  return Run{.kind = "task",
             .key = "fast",
             .node = node,
             .run_id = id,
             .attempt = 0,
             .start = start,
             .end = end,
             .result = end ? "ok" : ""};
}
TaskAudit Claim(double at, const std::string& app, const std::string& ticket, double expires) {
  return TaskAudit{.at = at,
                   .app = app,
                   .task = "fast",
                   .old_ticket = std::nullopt,
                   .new_ticket = ticket,
                   .new_expires = expires,
                   .ended_changed = false};
}
TaskAudit Clear(double at, const std::string& app, const std::string& ticket, bool release) {
  return TaskAudit{.at = at,
                   .app = app,
                   .task = "fast",
                   .old_ticket = ticket,
                   .new_ticket = std::nullopt,
                   .new_expires = std::nullopt,
                   .ended_changed = release};
}

bool Mentions(const CheckReport& r, const std::string& text) {
  for (const auto& v : r.violations) {
    if (v.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ChaosTaskChecks, SequentialRunsPass) {
  CheckReport r;
  CheckTasks({TaskRun("a", "r1", 10.1, 11), TaskRun("b", "r2", 12.1, 13)},
             {Claim(10, "a", "t1", 14), Clear(11.1, "a", "t1", true), Claim(12, "b", "t2", 16),
              Clear(13.1, "b", "t2", true)},
             r);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.task_runs, 2);
  EXPECT_EQ(r.task_claims, 2);
  EXPECT_EQ(r.allowed_overlaps, 0);
}

TEST(ChaosTaskChecks, AnOverlapWithoutReclaimIsAViolation) {
  CheckReport r;
  // b claims after a's release was written, yet a's command is still running (its end comes later): a lie.
  CheckTasks({TaskRun("a", "r1", 10.1, 13), TaskRun("b", "r2", 12.1, 13.5)},
             {Claim(10, "a", "t1", 14), Clear(11, "a", "t1", true), Claim(12, "b", "t2", 16)}, r);
  EXPECT_TRUE(Mentions(r, "overlap"));
}

TEST(ChaosTaskChecks, AnOverlapAfterExpiryAndSweepIsAllowedAndMeasured) {
  CheckReport r;
  // a froze: its ticket expired at 14, the janitor (c) swept it at 14.5, b claimed at 15; a's command ran on.
  CheckTasks({TaskRun("a", "r1", 10.1, 16), TaskRun("b", "r2", 15.1, 15.6)},
             {Claim(10, "a", "t1", 14), Clear(14.5, "c", "t1", false), Claim(15, "b", "t2", 19)}, r);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.allowed_overlaps, 1);
  EXPECT_EQ(r.tickets_swept, 1);
  EXPECT_NEAR(r.max_overlap_s, 0.5, 1e-9);
}

// A killed node's task run has no end row (octop-exec ended its command): it ended by the janitor's sweep, so
// a later claim's run is not an overlap; one starting before the sweep is.
TEST(ChaosTaskChecks, AKilledNodesRunWithoutAnEndRowEndsAtTheSweep) {
  CheckReport after;
  CheckTasks({TaskRun("a", "r1", 10.1, std::nullopt), TaskRun("b", "r2", 15.1, 15.6)},
             {Claim(10, "a", "t1", 14), Clear(14.5, "c", "t1", false), Claim(15, "b", "t2", 19)}, after);
  EXPECT_TRUE(after.violations.empty()) << after.violations.front();
  EXPECT_EQ(after.allowed_overlaps, 0);

  CheckReport before;
  CheckTasks({TaskRun("a", "r1", 10.1, std::nullopt), TaskRun("b", "r2", 12.1, 12.6)},
             {Claim(10, "a", "t1", 14), Clear(14.5, "c", "t1", false), Claim(12, "b", "t2", 19)}, before);
  EXPECT_TRUE(Mentions(before, "overlap"));
}

TEST(ChaosTaskChecks, ARunWithOnlyAnEndRowStartsAtItsClaim) {
  CheckReport r;
  chaos::Run killed_early = TaskRun("a", "r1", 16, 16);
  killed_early.has_start = false;
  CheckTasks({killed_early, TaskRun("b", "r2", 15.1, 15.6)},
             {Claim(10, "a", "t1", 14), Clear(14.5, "c", "t1", false), Claim(15, "b", "t2", 19)}, r);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.allowed_overlaps, 1);
}

TEST(ChaosTaskChecks, ASweepBeforeExpiryIsAViolation) {
  CheckReport r;
  CheckTasks({}, {Claim(10, "a", "t1", 14), Clear(12, "c", "t1", false)}, r);
  EXPECT_TRUE(Mentions(r, "before its expiry"));
}

TEST(ChaosTaskChecks, AStaleReleaseByAnotherNodeBreaksFencing) {
  CheckReport r;
  CheckTasks({}, {Claim(10, "b", "t2", 14), Clear(11, "a", "t2", true)}, r);
  EXPECT_TRUE(Mentions(r, "fencing broken"));
}

TEST(ChaosTaskChecks, ARunWithoutAClaimOfItsNodeIsAViolation) {
  CheckReport r;
  CheckTasks({TaskRun("a", "r1", 10.1, 11)}, {Claim(10, "b", "t1", 14)}, r);
  EXPECT_TRUE(Mentions(r, "no claim"));
}

Run JobRun(const std::string& job, int attempt, double start, double end, const std::string& result) {
  return Run{.kind = "job",
             .key = job,
             .node = "a",
             .run_id = job + std::to_string(attempt),
             .attempt = attempt,
             .start = start,
             .end = end,
             .result = result};
}
JobAudit JobClaim(double at, const std::string& app, const std::string& job, const std::string& token,
                  double expires) {
  return JobAudit{.at = at,
                  .app = app,
                  .job = job,
                  .old_status = "pending",
                  .new_status = "running",
                  .old_token = std::nullopt,
                  .new_token = token,
                  .old_expires = std::nullopt,
                  .new_expires = expires,
                  .new_error = ""};
}
JobAudit JobEnd(double at, const std::string& app, const std::string& job, const std::string& token,
                const std::string& status, const std::string& error = "") {
  return JobAudit{.at = at,
                  .app = app,
                  .job = job,
                  .old_status = "running",
                  .new_status = status,
                  .old_token = token,
                  .new_token = std::nullopt,
                  .old_expires = std::nullopt,
                  .new_expires = std::nullopt,
                  .new_error = error};
}

TEST(ChaosJobChecks, ARetriedJobThatSucceededPasses) {
  CheckReport r;
  CheckJobs({JobRun("j1", 1, 1, 2, "fail"), JobRun("j1", 2, 4, 5, "ok")},
            {JobClaim(0.9, "a", "j1", "k1", 9), JobEnd(2.1, "a", "j1", "k1", "failed"),
             JobClaim(3.9, "b", "j1", "k2", 12), JobEnd(5.1, "b", "j1", "k2", "success")},
            {{.id = "j1", .status = "success", .attempt = 2, .max_retries = 1}}, {"j1"}, r);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.retries, 1);
  EXPECT_EQ(r.jobs_success, 1);
}

TEST(ChaosJobChecks, LostNotFinalAndTooManyAttemptsAreViolations) {
  CheckReport r;
  CheckJobs({JobRun("j1", 1, 1, 2, "fail"), JobRun("j1", 2, 3, 4, "fail"), JobRun("j1", 3, 5, 6, "fail")}, {},
            {{.id = "j1", .status = "frozen", .attempt = 3, .max_retries = 1},
             {.id = "j2", .status = "failed", .attempt = 1, .max_retries = 3}},
            {"j1", "j2", "j3"}, r);
  EXPECT_TRUE(Mentions(r, "j3 was enqueued (201) and is gone"));
  EXPECT_TRUE(Mentions(r, "j2 ended the test failed"));
  EXPECT_TRUE(Mentions(r, "made 3 attempts with max_retries 1"));
  EXPECT_TRUE(Mentions(r, "attempt beyond 1 + max_retries"));
}

TEST(ChaosJobChecks, AJobRunningConcurrentlyWithItselfIsAViolation) {
  CheckReport r;
  CheckJobs({JobRun("j1", 1, 1, 5, "ok"), JobRun("j1", 2, 3, 4, "ok")}, {},
            {{.id = "j1", .status = "success", .attempt = 2, .max_retries = 3}}, {"j1"}, r);
  EXPECT_TRUE(Mentions(r, "job overlap"));
}

TEST(ChaosJobChecks, ASuccessWithoutAnOkRunOfItsAttemptIsAViolation) {
  CheckReport r;
  CheckJobs({JobRun("j1", 1, 1, 2, "fail")}, {},
            {{.id = "j1", .status = "success", .attempt = 1, .max_retries = 3}}, {"j1"}, r);
  EXPECT_TRUE(Mentions(r, "no run of that attempt ended ok"));
}

TEST(ChaosJobChecks, OnlyTheClaimerOrARescuerAfterExpiryEndsAnAttempt) {
  CheckReport ok;
  CheckJobs(
      {},
      {JobClaim(1, "a", "j1", "k1", 9), JobEnd(10, "b", "j1", "k1", "failed", "Job timed out (worker lost)")},
      {{.id = "j1", .status = "frozen", .attempt = 1, .max_retries = 0}}, {}, ok);
  EXPECT_TRUE(ok.violations.empty()) << ok.violations.front();
  EXPECT_EQ(ok.jobs_rescued, 1);

  CheckReport early;
  CheckJobs(
      {},
      {JobClaim(1, "a", "j1", "k1", 9), JobEnd(5, "b", "j1", "k1", "failed", "Job timed out (worker lost)")},
      {{.id = "j1", .status = "frozen", .attempt = 1, .max_retries = 0}}, {}, early);
  EXPECT_TRUE(Mentions(early, "fencing broken"));

  CheckReport stale;
  CheckJobs({}, {JobClaim(1, "a", "j1", "k1", 9), JobEnd(5, "b", "j1", "k1", "success")},
            {{.id = "j1", .status = "success", .attempt = 1, .max_retries = 0}}, {}, stale);
  EXPECT_TRUE(Mentions(stale, "fencing broken"));
}

TEST(ChaosJobChecks, JobsOfOneClaimShareItsTokenAndAReleasedAttemptIsClaimedAgain) {
  CheckReport r;
  // One claim of j1 and j2 (token k1); j2 is handed back unrun and claimed again (k2) as attempt 1.
  CheckJobs({JobRun("j1", 1, 1, 2, "ok"), JobRun("j2", 1, 4, 5, "ok")},
            {JobClaim(0.9, "a", "j1", "k1", 9), JobClaim(0.9, "a", "j2", "k1", 9),
             JobEnd(2.1, "a", "j1", "k1", "success"), JobEnd(2.5, "a", "j2", "k1", "pending"),
             JobClaim(3.9, "b", "j2", "k2", 12), JobEnd(5.1, "b", "j2", "k2", "success")},
            {{.id = "j1", .status = "success", .attempt = 1, .max_retries = 0},
             {.id = "j2", .status = "success", .attempt = 1, .max_retries = 0}},
            {"j1", "j2"}, r);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.jobs_success, 2);
}

// A run interrupted by its node's shutdown is handed back after it started (the attempt goes back down), so
// the same attempt number runs again, after it; without that hand-back a second run of a number is a
// violation.
TEST(ChaosJobChecks, AnAttemptHandedBackAfterItStartedMayRunAgainButNotOtherwise) {
  JobAudit first = JobClaim(0.9, "a", "j1", "k1", 9);
  first.new_attempt = 1;
  JobAudit handed_back = JobEnd(2.1, "a", "j1", "k1", "pending", "Interrupted by shutdown");
  handed_back.new_attempt = 0;
  JobAudit second = JobClaim(3.9, "b", "j1", "k2", 12);
  second.new_attempt = 1;
  JobAudit done = JobEnd(5.1, "b", "j1", "k2", "success");
  done.new_attempt = 1;
  const std::vector<chaos::Run> runs = {JobRun("j1", 1, 1, 2, "interrupted"), JobRun("j1", 1, 4, 5, "ok")};
  const std::vector<JobInfo> rows = {{.id = "j1", .status = "success", .attempt = 1, .max_retries = 0}};
  CheckReport ok;
  CheckJobs(runs, {first, handed_back, second, done}, rows, {"j1"}, ok);
  EXPECT_TRUE(ok.violations.empty()) << ok.violations.front();

  JobAudit failed = JobEnd(2.1, "a", "j1", "k1", "failed", "exit 1");
  failed.new_attempt = 1;  // a failed attempt keeps its number: running it again would be a second run
  CheckReport twice;
  CheckJobs(runs, {first, failed, second, done}, rows, {"j1"}, twice);
  EXPECT_TRUE(Mentions(twice, "a second run of the same attempt"));
}

// A killed node's command dies with it (octop-exec), so its run has no end row: it counts as ended by the
// rescue after its expiry, and a later attempt may start after that, not before.
TEST(ChaosJobChecks, AKilledNodesRunWithoutAnEndRowEndsAtTheRescue) {
  chaos::Run killed = JobRun("j1", 1, 1, 0, "");
  killed.end = std::nullopt;
  JobAudit first = JobClaim(0.9, "a", "j1", "k1", 9);
  first.new_attempt = 1;
  JobAudit second = JobClaim(11, "b", "j1", "k2", 20);
  second.new_attempt = 2;
  const std::vector<JobAudit> audit = {first,
                                       JobEnd(10, "b", "j1", "k1", "failed", "Job timed out (worker lost)"),
                                       second, JobEnd(13, "b", "j1", "k2", "success")};
  CheckReport after;
  CheckJobs({killed, JobRun("j1", 2, 11.5, 12.5, "ok")}, audit,
            {{.id = "j1", .status = "success", .attempt = 2, .max_retries = 1}}, {"j1"}, after);
  EXPECT_TRUE(after.violations.empty()) << after.violations.front();

  CheckReport before;
  CheckJobs({killed, JobRun("j1", 2, 5, 6, "ok")}, audit,
            {{.id = "j1", .status = "success", .attempt = 2, .max_retries = 1}}, {"j1"}, before);
  EXPECT_TRUE(Mentions(before, "job overlap"));
}

TEST(ChaosRunLog, PairsStartAndEndRowsByRun) {
  std::vector<chaos::Run> runs = PairRuns({{"task", "fast", "a", "r1", "start", "", 0, 1.0},
                                           {"task", "fast", "b", "r2", "start", "", 0, 1.5},
                                           {"task", "fast", "a", "r1", "end", "killed", 0, 2.0}});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id, "r1");
  EXPECT_EQ(runs[0].end, 2.0);
  EXPECT_EQ(runs[0].result, "killed");
  EXPECT_FALSE(runs[1].end.has_value());
}

}  // namespace
}  // namespace octop::chaos
