// PostgresJobStore: the JobStore of the cluster backend (store/job_store.h for the contract, jobs.sql and
// docs/store.md for the SQL). Claims are one statement with FOR UPDATE SKIP LOCKED; a batch of completions is
// one statement over arrays; concurrent enqueues are written in groups (EnqueueGroups); wake-ups go out after
// the enqueue's commit (WakeupSender).
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "postgres_queries.h"
#include "store/enqueue_groups.h"
#include "store/job_rules.h"
#include "store/job_store.h"
#include "store/postgres/pg_listener.h"
#include "store/postgres/pg_namespace.h"
#include "store/postgres/pg_timestamp.h"
#include "store/postgres/postgres_store.h"
#include "store/postgres/wakeup_sender.h"

namespace octop::store::postgres {

namespace {

// ---- Jobs -------------------------------------------------------------------------------------------------

// An array literal ({"a",NULL,"b"}) for a text-typed array parameter: every element quoted and escaped, so
// the server parses it into exactly these values whatever they contain (the value is still a bound
// parameter).
std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// The columns of a job row as GetJob, ListJobs, ListFailedJobs and ClaimJobs return them (jobs.sql), in
// binary format: no timestamp or integer is formatted as text by the server and parsed back here, which a
// claim of hundreds of rows paid for on both sides (docs/store.md §8.3 ClaimJobs). Type OIDs of PostgreSQL's
// catalog.
constexpr Oid kTextOid = 25;
constexpr Oid kInt4Oid = 23;
constexpr Oid kTimestamptzOid = 1184;
const std::vector<Oid>& JobColumns() {
  static const std::vector<Oid> columns{
      kTextOid,        kTextOid,        kTextOid,        kTextOid, kInt4Oid, kTimestamptzOid,
      kTextOid,        kInt4Oid,        kInt4Oid,        kTextOid, kTextOid, kTimestamptzOid,
      kTimestamptzOid, kTimestamptzOid, kTimestamptzOid, kTextOid, kTextOid};
  return columns;
}

Status CheckColumns(const PgResult& r, const std::vector<Oid>& columns) {
  if (r.BinaryColumnsAre(columns)) return Status::Ok();
  return InternalError(
      "PostgreSQL: a job row's columns are not of the types octop reads (was octop_jobs altered?)");
}

Result<JobInfo> ReadJob(const PgResult& r, int i) {
  JobInfo job;
  job.id = r.Text(i, 0);
  job.queue = r.Text(i, 1);
  job.kind = r.Text(i, 2);
  job.payload = r.Text(i, 3);
  OCTOP_ASSIGN_OR_RETURN(job.priority, r.Int4(i, 4));
  OCTOP_ASSIGN_OR_RETURN(job.scheduled_at, r.Timestamp(i, 5));
  const auto status = ParseJobStatus(r.Text(i, 6));
  if (!status) return InternalError("PostgreSQL: unknown job status '" + r.Text(i, 6) + "'");
  job.status = *status;
  OCTOP_ASSIGN_OR_RETURN(job.attempt, r.Int4(i, 7));
  OCTOP_ASSIGN_OR_RETURN(job.max_retries, r.Int4(i, 8));
  job.attempt_token = r.OptText(i, 9);
  job.last_error = r.OptText(i, 10);
  OCTOP_ASSIGN_OR_RETURN(job.created_at, r.Timestamp(i, 11));
  OCTOP_ASSIGN_OR_RETURN(job.started_at, r.OptTimestamp(i, 12));
  OCTOP_ASSIGN_OR_RETURN(job.completed_at, r.OptTimestamp(i, 13));
  OCTOP_ASSIGN_OR_RETURN(job.expires_at, r.OptTimestamp(i, 14));
  job.unique_key = r.OptText(i, 15);
  job.worker_id = r.OptText(i, 16);
  return job;
}

// Every row of `r`, whose columns are JobColumns() followed by `extra` (checked).
Result<std::vector<JobInfo>> ReadJobs(const PgResult& r, const std::vector<Oid>& extra = {}) {
  std::vector<Oid> columns = JobColumns();
  columns.insert(columns.end(), extra.begin(), extra.end());
  OCTOP_RETURN_IF_ERROR(CheckColumns(r, columns));
  std::vector<JobInfo> jobs;
  jobs.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    OCTOP_ASSIGN_OR_RETURN(JobInfo job, ReadJob(r, i));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::string OutcomeCode(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSuccess:
      return "0";
    case JobOutcome::kRetry:
    case JobOutcome::kFail:
      return "1";
    case JobOutcome::kCancel:
      return "2";
    case JobOutcome::kRelease:
      return "3";
  }
  return "";
}

// `statement` with its result in binary format (ReadJobs reads it).
Statement Binary(Statement statement) {
  statement.binary_result = true;
  return statement;
}

// How many times an enqueue re-inserts items whose live duplicate finished between its insert and its lookup.
constexpr int kEnqueueAttempts = 8;

class PostgresJobStore final : public PgStoreBase<JobStore> {
 public:
  PostgresJobStore(std::unique_ptr<PgNamespace> ns, MigrationLine line)
      : PgStoreBase(std::move(ns), line),
        enqueue_jobs_(Make("EnqueueJobs", sql::kEnqueueJobs)),
        find_live_keys_(Make("FindLiveJobsByKeys", sql::kFindLiveJobsByKeys)),
        claim_jobs_(Binary(Make("ClaimJobs", sql::kClaimJobs))),
        complete_jobs_(Make("CompleteJobs", sql::kCompleteJobs)),
        complete_succeeded_jobs_(Make("CompleteSucceededJobs", sql::kCompleteSucceededJobs)),
        rescue_jobs_(Make("RescueExpiredJobs", sql::kRescueExpiredJobs)),
        renew_job_leases_(Make("RenewJobLeases", sql::kRenewJobLeases)),
        retry_job_(Make("RetryJob", sql::kRetryJob)),
        unwait_job_(Make("UnwaitJob", sql::kUnwaitJob)),
        lock_job_to_cancel_(Make("LockJobToCancel", sql::kLockJobToCancel)),
        freeze_cancelled_job_(Make("FreezeCancelledJob", sql::kFreezeCancelledJob)),
        request_job_stop_(Make("RequestJobStop", sql::kRequestJobStop)),
        lock_job_rows_(Make("LockJobRows", sql::kLockJobRows)),
        lock_expired_leases_(Make("LockExpiredLeases", sql::kLockExpiredLeases)),
        cancel_requests_(Make("CancelRequestsFor", sql::kCancelRequestsFor)),
        get_job_(Binary(Make("GetJob", sql::kGetJob))),
        list_jobs_(Binary(Make("ListJobs", sql::kListJobs))),
        list_failed_jobs_(Binary(Make("ListFailedJobs", sql::kListFailedJobs))),
        job_summary_(Make("JobSummary", sql::kJobSummary)),
        job_stats_(Make("JobStats", sql::kJobStats)),
        next_job_due_(Make("NextJobDueAt", sql::kNextJobDueAt)),
        set_queue_paused_(Make("SetQueuePaused", sql::kSetQueuePaused)),
        list_queues_(Make("ListQueues", sql::kListQueues)),
        delete_finished_(Make("DeleteFinishedJobs", sql::kDeleteFinishedJobs)),
        reconcile_job_sets_(Make("ReconcileJobSets", sql::kReconcileJobSets)),
        get_config_(Make("GetConfig", sql::kGetConfig)),
        set_config_(Make("SetConfig", sql::kSetConfig)),
        notify_job_queues_(Make("NotifyJobQueues", sql::kNotifyJobQueues)),
        enqueueing_done_(Make("EnqueueingDone", sql::kEnqueueingDone)),
        index_plan_settings_(Make("IndexPlanSettings", sql::kIndexPlanSettings)),
        own_write_settings_(Make("OwnWriteSettings", sql::kOwnWriteSettings)),
        enqueue_groups_([this](const std::vector<JobSpec>& jobs) { return EnqueueBatch(jobs); }),
        wakeups_([this](const std::vector<std::string>& queues) { SendWakeups(queues); }) {}

  // ---- Jobs (jobs.sql) ----

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    return enqueue_groups_.Enqueue(jobs);
  }

  // One batch (the batches of an enqueue group together) in one transaction on a pooled connection.
  Result<std::vector<EnqueueResult>> EnqueueBatch(const std::vector<JobSpec>& jobs) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, ns().pool().Acquire());
    const bool keyed =
        std::any_of(jobs.begin(), jobs.end(), [](const auto& j) { return j.unique_key.has_value(); });
    // Without unique keys the batch is one statement, hence one transaction. With them the lookups of skipped
    // items and any re-insert must commit with it.
    if (keyed) OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> out, EnqueueOn(*conn, jobs, /*notify=*/false));
    if (keyed) OCTOP_RETURN_IF_ERROR(conn->Exec("COMMIT"));
    // The wake-up goes in a transaction of its own after the commit (jobs.sql NotifyJobQueues says why), sent
    // by wakeups_ after this returns. Its failure is not the enqueue's: the jobs are committed, and polling
    // finds them.
    std::set<std::string> queues;
    for (const JobSpec& job : jobs) queues.insert(job.queue);
    wakeups_.Request(queues);
    return out;
  }

  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, ns().pool().Acquire());
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    // The caller's SQL names the namespace's tables unqualified.
    OCTOP_RETURN_IF_ERROR(conn->Exec("SET LOCAL search_path TO " + ns().quoted_schema() + ", public"));
    PgTransaction txn(*this, *conn);
    Status result = fn(txn);
    if (result.ok() && txn.failure()) result = *txn.failure();
    if (result.ok() && conn->raw() != nullptr && PQtransactionStatus(conn->raw()) != PQTRANS_INTRANS) {
      result = FailedPreconditionError("the transaction is no longer open (a statement ended or aborted it)");
    }
    if (!result.ok()) {
      (void)conn->Exec("ROLLBACK");  // if this fails the pool closes the connection, which rolls back too
      return result;
    }
    return conn->Exec("COMMIT");
  }

  Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) override {
    std::optional<std::string> kinds;
    if (!params.kinds.empty()) kinds = TextArrayLiteral(params.kinds);
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, ns().RunWithSettings(index_plan_settings_, claim_jobs_,
                                         {NowParam(), params.queue, std::to_string(params.limit), kinds,
                                          FormatInterval(params.timeout), params.worker_id}));
    OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobs(r));
    std::sort(jobs.begin(), jobs.end(), [](const JobInfo& a, const JobInfo& b) {
      return std::tie(a.priority, a.scheduled_at, a.id) < std::tie(b.priority, b.scheduled_at, b.id);
    });
    return jobs;
  }

  Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) override {
    std::vector<bool> applied(completions.size(), false);
    if (completions.empty()) return applied;
    std::vector<std::optional<std::string>> ids, tokens;
    ids.reserve(completions.size());
    tokens.reserve(completions.size());
    for (const JobCompletion& c : completions) {
      ids.emplace_back(c.id);
      tokens.emplace_back(c.attempt_token);
    }
    // A batch of plain successes, what a busy queue mostly writes, takes the statement without the other
    // outcomes' arrays (jobs.sql CompleteSucceededJobs).
    const bool all_succeeded = std::all_of(
        completions.begin(), completions.end(),
        [](const JobCompletion& c) { return c.outcome == JobOutcome::kSuccess && !c.error.has_value(); });
    PgParams params{NowParam(), ArrayLiteral(ids), ArrayLiteral(tokens)};
    if (all_succeeded) {
      OCTOP_ASSIGN_OR_RETURN(PgResult r,
                             ns().RunWithSettings(index_plan_settings_, complete_succeeded_jobs_, params));
      return Applied(r, std::move(applied));
    }
    std::vector<std::optional<std::string>> outcomes, errors, delays;
    for (const JobCompletion& c : completions) {
      outcomes.emplace_back(OutcomeCode(c.outcome));
      errors.emplace_back(c.error);
      delays.emplace_back(FormatInterval(c.retry_delay));
    }
    params.push_back(ArrayLiteral(outcomes));
    params.push_back(ArrayLiteral(errors));
    params.push_back(ArrayLiteral(delays));
    params.push_back(std::string(kJobCancelledError));
    // The batch's job rows are locked first, in a statement of its own, so that CompleteJobs sees every stop
    // request written for them (jobs.sql LockJobRows).
    const PgParams lock_params{params[1]};
    OCTOP_ASSIGN_OR_RETURN(PgResult r, ns().RunPipeline({{&index_plan_settings_, nullptr},
                                                         {&lock_job_rows_, &lock_params},
                                                         {&complete_jobs_, &params}}));
    return Applied(r, std::move(applied));
  }

  Result<std::vector<RescuedJob>> RescueExpiredJobs(const RescueExpiredJobsParams& params) override {
    const std::string spare = TextArrayLiteral(params.spare_tokens);
    const std::optional<std::string> expired_before = PgNamespace::TimeParam(params.expired_before);
    const PgParams lock_params{NowParam(), spare, expired_before};
    const PgParams rescue_params{NowParam(),
                                 FormatInterval(params.backoff_base),
                                 FormatInterval(params.backoff_max),
                                 std::string(kJobTimedOutError),
                                 spare,
                                 expired_before,
                                 std::string(kJobCancelledError)};
    // Leases and job rows are locked first, so that the rescue sees every stop request written for them
    // (jobs.sql LockExpiredLeases).
    OCTOP_ASSIGN_OR_RETURN(PgResult r, ns().RunPipeline({{&index_plan_settings_, nullptr},
                                                         {&lock_expired_leases_, &lock_params},
                                                         {&rescue_jobs_, &rescue_params}}));
    std::vector<RescuedJob> rescued;
    for (int i = 0; i < r.rows(); ++i) {
      rescued.push_back(
          {r.Text(i, 0), ParseJobStatus(r.Text(i, 1)).value_or(JobStatus::kFailed), std::stoi(r.Text(i, 2))});
    }
    std::sort(rescued.begin(), rescued.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return rescued;
  }

  Result<long> RenewJobLeases(const RenewJobLeasesParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, ns().RunWithSettings(index_plan_settings_, renew_job_leases_,
                                                            {NowParam(), TextArrayLiteral(params.tokens),
                                                             FormatInterval(params.lease)}));
    return static_cast<long>(r.AffectedRows());
  }

  Status RetryJob(const RetryJobParams& params) override {
    Result<PgResult> result = ns().RunWithSettings(own_write_settings_, retry_job_,
                                                   {NowParam(), params.id, PgNotifyPrefix(ns().schema())});
    if (!result.ok()) {
      if (IsUniqueViolation(result.status())) {
        return ConflictError("Job " + params.id +
                             " cannot be retried: another live job holds its unique key");
      }
      return result.status();
    }
    const PgResult& r = *result;
    if (r.IsNull(0, 0)) return NoSuchJob(params.id);
    if (Count(r, 0, 1) == 0) {
      // The status was read before the statement locked anything: a failed job not retried was claimed
      // meanwhile (jobs.sql RetryJob).
      const std::string status = r.Text(0, 0) == "failed" ? "running" : r.Text(0, 0);
      return ConflictError("Job " + params.id + " is " + status +
                           ", only failed or frozen jobs can be retried");
    }
    return Status::Ok();
  }

  Result<CancelJobResult> CancelJob(const CancelJobParams& params) override {
    // A job handed back to wait between the transaction's two reads is cancelled by the next try (jobs.sql,
    // before UnwaitJob).
    for (int attempt = 0; attempt < 3; ++attempt) {
      OCTOP_ASSIGN_OR_RETURN(std::optional<CancelJobResult> result, CancelJobOnce(params.id));
      if (result) return *result;
    }
    return UnavailableError("Job " + params.id + " changed while it was being cancelled");
  }

  Result<std::vector<std::string>> CancelRequestsFor(const std::vector<std::string>& tokens) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(cancel_requests_, {TextArrayLiteral(tokens)}));
    std::vector<std::string> ids;
    ids.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.Text(i, 0));
    return ids;
  }

  Result<JobInfo> GetJob(std::string_view id) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(get_job_, {std::string(id)}));
    if (r.rows() == 0) return NoSuchJob(id);
    OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobs(r));
    return std::move(jobs.front());
  }

  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override {
    std::optional<std::string> status;
    if (params.status) status = std::string(JobStatusName(*params.status));
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r,
        Run(list_jobs_,
            {status, params.queue, params.kind, std::to_string(params.limit), std::to_string(params.offset),
             params.payload_budget ? std::optional<std::string>(
                                         std::to_string(std::max<std::int64_t>(0, *params.payload_budget)))
                                   : std::nullopt}));
    OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobs(r, {kInt4Oid}));
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 3)) {
        OCTOP_ASSIGN_OR_RETURN(jobs[static_cast<std::size_t>(i)].omitted_payload_bytes, r.Int4(i, 17));
      }
    }
    return jobs;
  }

  Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(list_failed_jobs_, {params.queue, std::to_string(params.limit)}));
    return ReadJobs(r);
  }

  Result<std::vector<JobStatusCount>> SummarizeJobs() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(job_summary_, {NowParam()}));
    std::vector<JobStatusCount> counts;
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 1)) continue;  // the LEFT JOIN's row when there are no jobs
      JobStatusCount line;
      line.queue = r.Text(i, 1);
      const auto status = ParseJobStatus(r.Text(i, 2));
      if (!status) return InternalError("PostgreSQL: unknown job status '" + r.Text(i, 2) + "'");
      line.status = *status;
      line.count = Count(r, i, 3);
      OCTOP_ASSIGN_OR_RETURN(line.oldest_scheduled_at, OptTime(r, i, 4));
      if (!r.IsNull(i, 5)) line.average_delay = std::chrono::microseconds(std::stoll(r.Text(i, 5)));
      counts.push_back(std::move(line));
    }
    std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
      return std::tie(a.queue, a.status) < std::tie(b.queue, b.status);
    });
    return counts;
  }

  Result<JobStats> ComputeJobStats(const JobStatsFilter& params) override {
    OCTOP_ASSIGN_OR_RETURN(WallTime now, DatabaseNow());
    OCTOP_ASSIGN_OR_RETURN(JobStats stats, JobStatsGrid(params, now));
    if ((params.queue && !IsStorableText(*params.queue)) || (params.kind && !IsStorableText(*params.kind))) {
      return stats;  // no stored job has such a name
    }
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, Run(job_stats_, {FormatTimestamp(stats.from), FormatTimestamp(stats.to),
                                     std::to_string(params.bucket.count()), params.queue, params.kind}));
    const auto us = [&](int i, int col) -> std::optional<std::chrono::microseconds> {
      if (r.IsNull(i, col)) return std::nullopt;
      return std::chrono::microseconds(std::stoll(r.Text(i, col)));
    };
    for (int i = 0; i < r.rows(); ++i) {
      const long long index = std::stoll(r.Text(i, 0));
      if (index < 0 || index >= static_cast<long long>(stats.buckets.size())) continue;
      JobStatsBucket& b = stats.buckets[static_cast<std::size_t>(index)];
      b.succeeded = Count(r, i, 1);
      b.frozen = Count(r, i, 2);
      b.avg_latency = us(i, 3);
      b.max_latency = us(i, 4);
      b.avg_run = us(i, 5);
    }
    return stats;
  }

  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(next_job_due_, {std::string(queue)}));
    return OptTime(r, 0, 0);
  }

  Status SetQueuePaused(std::string_view queue, bool paused) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(set_queue_paused_, {NowParam(), std::string(queue), paused ? "true" : "false",
                                                   PgNotifyPrefix(ns().schema())}));
    (void)r;
    return Status::Ok();
  }

  Result<std::vector<QueueInfo>> ListQueues() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(list_queues_, {}));
    std::vector<QueueInfo> queues;
    for (int i = 0; i < r.rows(); ++i) queues.push_back({r.Text(i, 0), r.Bool(i, 1)});
    std::sort(queues.begin(), queues.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return queues;
  }

  Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) override {
    std::vector<std::string> statuses;
    for (JobStatus s : params.statuses) statuses.emplace_back(JobStatusName(s));
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, ns().RunWithSettings(own_write_settings_, delete_finished_,
                                         {NowParam(), TextArrayLiteral(statuses),
                                          FormatInterval(params.older_than), std::to_string(params.limit)}));
    return r.AffectedRows();
  }

  Result<long> ReconcileJobSets() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(reconcile_job_sets_, {}));
    return r.rows() == 1 ? std::stol(r.Text(0, 0)) : 0;
  }

  Result<std::optional<std::string>> GetConfig(std::string_view key) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(get_config_, {std::string(key)}));
    if (r.rows() == 0) return std::optional<std::string>();
    return std::optional<std::string>(r.Text(0, 0));
  }

  Status SetConfig(std::string_view key, std::string_view value_json) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(set_config_, {NowParam(), std::string(key), std::string(value_json),
                                             PgNotifyPrefix(ns().schema())}));
    (void)r;
    return Status::Ok();
  }

  // Inserts a validated batch on `conn` (inside a transaction when any item has a unique key). Items skipped
  // by ON CONFLICT are looked up; one whose live duplicate finished in between is inserted again. `notify`:
  // the statement itself NOTIFYs (delivered when the enclosing transaction commits).
  Result<std::vector<EnqueueResult>> EnqueueOn(PgConnection& conn, const std::vector<JobSpec>& jobs,
                                               bool notify) {
    std::vector<EnqueueResult> out(jobs.size());
    std::vector<std::string> new_ids = NewJobIds(jobs.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i].id = std::move(new_ids[i]);
    std::vector<std::size_t> todo(jobs.size());
    for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
    std::optional<std::string> prefix;
    if (notify) prefix = PgNotifyPrefix(ns().schema());
    for (int attempt = 0; attempt < kEnqueueAttempts && !todo.empty(); ++attempt) {
      std::vector<std::optional<std::string>> ids, queues, kinds, payloads, priorities, ats, retries, keys;
      for (std::size_t i : todo) {
        const JobSpec& job = jobs[i];
        ids.emplace_back(out[i].id);
        queues.emplace_back(job.queue);
        kinds.emplace_back(job.kind);
        payloads.emplace_back(job.payload);
        priorities.emplace_back(std::to_string(job.priority));
        ats.emplace_back(job.scheduled_at ? std::optional(FormatTimestamp(*job.scheduled_at)) : std::nullopt);
        retries.emplace_back(std::to_string(job.max_retries));
        keys.emplace_back(job.unique_key);
      }
      OCTOP_ASSIGN_OR_RETURN(
          PgResult inserted,
          conn.ExecPrepared(enqueue_jobs_.name, enqueue_jobs_.text,
                            {NowParam(), ArrayLiteral(ids), ArrayLiteral(queues), ArrayLiteral(kinds),
                             ArrayLiteral(payloads), ArrayLiteral(priorities), ArrayLiteral(ats),
                             ArrayLiteral(retries), ArrayLiteral(keys), prefix}));
      std::set<std::string> done;
      for (int r = 0; r < inserted.rows(); ++r) done.insert(inserted.Text(r, 0));
      std::vector<std::size_t> skipped;
      for (std::size_t i : todo) {
        if (!done.contains(out[i].id)) skipped.push_back(i);
      }
      if (skipped.empty()) return out;
      std::vector<std::optional<std::string>> wanted;
      for (std::size_t i : skipped) wanted.emplace_back(jobs[i].unique_key);
      OCTOP_ASSIGN_OR_RETURN(PgResult live, conn.ExecPrepared(find_live_keys_.name, find_live_keys_.text,
                                                              {ArrayLiteral(wanted)}));
      std::map<std::string, std::string> holder;
      for (int r = 0; r < live.rows(); ++r) holder.emplace(live.Text(r, 0), live.Text(r, 1));
      todo.clear();
      for (std::size_t i : skipped) {
        auto it = jobs[i].unique_key ? holder.find(*jobs[i].unique_key) : holder.end();
        if (it == holder.end()) {
          todo.push_back(i);  // its holder finished meanwhile: insert it again
        } else {
          out[i] = {it->second, true};
        }
      }
    }
    if (!todo.empty()) return UnavailableError("EnqueueJobs: unique keys kept changing hands, try again");
    return out;
  }

  // One try of CancelJob in a transaction of its own; nullopt: the job was handed back meanwhile, try again.
  Result<std::optional<CancelJobResult>> CancelJobOnce(const std::string& id) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, ns().pool().Acquire());
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    Result<std::optional<CancelJobResult>> result = CancelJobIn(*conn, id);
    const bool commit = result.ok() && result->has_value();
    if (!commit) {
      (void)conn->Exec("ROLLBACK");  // if this fails the pool closes the connection, which rolls back too
      return result;
    }
    OCTOP_RETURN_IF_ERROR(conn->Exec("COMMIT"));
    return result;
  }

  Result<std::optional<CancelJobResult>> CancelJobIn(PgConnection& conn, const std::string& id) {
    auto exec = [&](const Statement& st, const PgParams& params) {
      return conn.ExecPrepared(st.name, st.text, params);
    };
    OCTOP_RETURN_IF_ERROR(exec(own_write_settings_, {}).status());
    OCTOP_ASSIGN_OR_RETURN(PgResult unwaited, exec(unwait_job_, {id}));
    OCTOP_ASSIGN_OR_RETURN(PgResult job, exec(lock_job_to_cancel_, {id}));
    if (job.rows() == 0) return NoSuchJob(id);
    const std::string status = job.Text(0, 0);
    if (status == "running" && !job.IsNull(0, 1)) {
      OCTOP_RETURN_IF_ERROR(
          exec(request_job_stop_, {NowParam(), id, job.Text(0, 1), PgNotifyPrefix(ns().schema())}).status());
      return std::optional<CancelJobResult>(CancelJobResult::kStopRequested);
    }
    if (status == "success" || status == "frozen")
      return ConflictError("Job " + id + " has already finished");
    if (unwaited.rows() == 0) return std::optional<CancelJobResult>();  // handed back meanwhile
    OCTOP_ASSIGN_OR_RETURN(PgResult frozen,
                           exec(freeze_cancelled_job_, {NowParam(), id, std::string(kJobCancelledError)}));
    if (Count(frozen, 0, 0) != 1) return std::optional<CancelJobResult>();
    return std::optional<CancelJobResult>(CancelJobResult::kCancelled);
  }

  static Result<std::vector<bool>> Applied(const PgResult& r, std::vector<bool> applied) {
    for (int i = 0; i < r.rows(); ++i) {
      const long ord = Count(r, i, 0);
      if (ord >= 1 && static_cast<std::size_t>(ord) <= applied.size())
        applied[static_cast<std::size_t>(ord - 1)] = true;
    }
    return applied;
  }

  // Transaction on one pooled connection inside BEGIN (WithTransaction).
  class PgTransaction final : public Transaction {
   public:
    PgTransaction(PostgresJobStore& store, PgConnection& conn) : store_(store), conn_(conn) {}

    Result<SqlRows> Execute(std::string_view sql_text,
                            const std::vector<std::optional<std::string>>& params) override {
      if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
      Result<PgResult> r = conn_.ExecParams(std::string(sql_text), params);
      if (!r.ok()) {
        failure_ = r.status();
        return r.status();
      }
      SqlRows out;
      const PGresult* raw = r->raw();
      const int columns = raw != nullptr ? PQnfields(raw) : 0;
      for (int c = 0; c < columns; ++c) out.columns.emplace_back(PQfname(raw, c));
      for (int i = 0; i < r->rows(); ++i) {
        std::vector<std::optional<std::string>> values;
        for (int c = 0; c < columns; ++c) values.push_back(r->OptText(i, c));
        out.rows.push_back(std::move(values));
      }
      out.affected_rows = r->AffectedRows();
      return out;
    }

    Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
      if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
      Result<std::vector<EnqueueResult>> out = store_.EnqueueOn(conn_, jobs, /*notify=*/true);
      if (out.ok()) {
        const Statement& done = store_.enqueueing_done_;
        Status on = conn_.ExecPrepared(done.name, done.text, {}).status();
        if (!on.ok()) out = on;
      }
      if (!out.ok()) failure_ = out.status();
      return out;
    }

    std::string_view backend() const override { return "postgres"; }
    const std::optional<Status>& failure() const { return failure_; }

   private:
    PostgresJobStore& store_;
    PgConnection& conn_;
    std::optional<Status> failure_;
  };

 private:
  // On wakeups_'s thread: one NOTIFY per queue, all in one transaction on a pooled connection.
  void SendWakeups(const std::vector<std::string>& queues) {
    Result<ConnectionPool::Lease> conn = ns().pool().Acquire();
    if (!conn.ok()) return;
    (void)(*conn)->ExecPrepared(notify_job_queues_.name, notify_job_queues_.text,
                                {PgNotifyPrefix(ns().schema()), TextArrayLiteral(queues)});
  }

  const Statement enqueue_jobs_, find_live_keys_, claim_jobs_, complete_jobs_, complete_succeeded_jobs_,
      rescue_jobs_, renew_job_leases_, retry_job_, unwait_job_, lock_job_to_cancel_, freeze_cancelled_job_,
      request_job_stop_, lock_job_rows_, lock_expired_leases_, cancel_requests_, get_job_, list_jobs_,
      list_failed_jobs_, job_summary_, job_stats_, next_job_due_, set_queue_paused_, list_queues_,
      delete_finished_, reconcile_job_sets_, get_config_, set_config_, notify_job_queues_, enqueueing_done_;
  // Run before the statements that must find their rows through an index (jobs.sql, IndexPlanSettings), and
  // before octop's other writes of octop_jobs (OwnWriteSettings).
  const Statement index_plan_settings_, own_write_settings_;
  EnqueueGroups enqueue_groups_;
  // Last: destroyed first, so its pending wake-ups are sent while the pool is still there.
  WakeupSender wakeups_;
};

}  // namespace

}  // namespace octop::store::postgres

namespace octop::store {

Result<std::unique_ptr<JobStore>> OpenPostgresJobStore(const std::string& conninfo,
                                                       const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<postgres::PgNamespace> ns,
                         postgres::PgNamespace::Open(conninfo, options));
  return std::unique_ptr<JobStore>(
      std::make_unique<postgres::PostgresJobStore>(std::move(ns), MigrationLine::kJobs));
}

}  // namespace octop::store
