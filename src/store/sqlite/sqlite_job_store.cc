// SqliteJobStore: the JobStore of the embedded backend (store/job_store.h for the contract, jobs.sql and
// docs/store.md for the SQL). Writes that read before they write (enqueue with unique keys, claims,
// completions, retries) run inside BEGIN IMMEDIATE, so no other writer comes between.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "sqlite_queries.h"
#include "store/job_rules.h"
#include "store/job_store.h"
#include "store/sqlite/sqlite_namespace.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_time.h"

namespace octop::store::sqlite {

namespace {

// The 17 columns every job statement returns, in jobs.sql's order. An unreadable value fails `row`.
JobInfo ReadJobRow(Stmt& row) {
  JobInfo job;
  job.id = row.Text(0);
  job.queue = row.Text(1);
  job.kind = row.Text(2);
  job.payload = row.Text(3);
  job.priority = static_cast<int>(row.Int(4));
  job.scheduled_at = row.Time(5).value_or(WallTime{});
  const std::string status = row.Text(6);
  if (const auto parsed = ParseJobStatus(status)) {
    job.status = *parsed;
  } else {
    row.Fail(InternalError("unknown job status '" + status + "' for job " + job.id));
  }
  job.attempt = static_cast<int>(row.Int(7));
  job.max_retries = static_cast<int>(row.Int(8));
  job.attempt_token = row.OptText(9);
  job.last_error = row.OptText(10);
  job.created_at = row.Time(11).value_or(WallTime{});
  job.started_at = row.Time(12);
  job.completed_at = row.Time(13);
  job.expires_at = row.Time(14);
  job.unique_key = row.OptText(15);
  job.worker_id = row.OptText(16);
  return job;
}

// Every row of `row` until it is done, or its failure.
Result<std::vector<JobInfo>> ReadJobRows(Stmt& row) {
  std::vector<JobInfo> jobs;
  while (row.Step()) jobs.push_back(ReadJobRow(row));
  OCTOP_RETURN_IF_ERROR(row.status());
  return jobs;
}

// now + offset as stored text.
Result<std::string> JobTimeAfter(Connection& conn, const std::string& now, std::chrono::microseconds offset) {
  if (offset.count() == 0) return now;
  Stmt row(conn, sql::kNowPlus);
  row.BindNull(":at").Bind(":now", now).Bind(":offset", OffsetModifier(offset));
  if (!row.Step()) {
    OCTOP_RETURN_IF_ERROR(row.status());
    return InternalError("NowPlus returned no row");
  }
  return row.Text(0);
}

void AddQueue(std::vector<std::string>& queues, const std::string& queue) {
  if (std::find(queues.begin(), queues.end(), queue) == queues.end()) queues.push_back(queue);
}

// The live job holding `unique_key`, if any.
Result<std::optional<std::string>> LiveJobWithKey(Connection& conn, const std::string& unique_key) {
  Stmt live(conn, sql::kFindLiveJobByKey);
  live.Bind(":unique_key", unique_key);
  std::optional<std::string> id;
  if (live.Step()) id = live.Text(0);
  OCTOP_RETURN_IF_ERROR(live.status());
  return id;
}

// A job's status, unique key and queue; nullopt when there is no such job.
struct JobState {
  std::string status;
  std::optional<std::string> unique_key;
  std::string queue;
};
Result<std::optional<JobState>> ReadJobState(Connection& conn, const std::string& id) {
  Stmt row(conn, sql::kJobStatusAndKey);
  row.Bind(":id", id);
  std::optional<JobState> state;
  if (row.Step()) state = JobState{row.Text(0), row.OptText(1), row.Text(2)};
  OCTOP_RETURN_IF_ERROR(row.status());
  return state;
}

// Inserts a validated batch on `conn`, which must hold the write lock (BEGIN IMMEDIATE): the unique-key
// lookup and the insert cannot be separated by another writer. Appends the queues that received a job to
// `queues`.
Result<std::vector<EnqueueResult>> EnqueueOnConnection(Connection& conn, const std::string& now,
                                                       const std::vector<JobSpec>& jobs,
                                                       std::vector<std::string>& queues) {
  std::vector<EnqueueResult> out;
  out.reserve(jobs.size());
  for (const JobSpec& job : jobs) {
    if (job.unique_key) {
      OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> holder, LiveJobWithKey(conn, *job.unique_key));
      if (holder) {
        out.push_back({*holder, true});
        continue;
      }
    }
    const std::string scheduled_at = job.scheduled_at ? FormatTime(*job.scheduled_at) : now;
    EnqueueResult inserted{NewJobId(), false};
    OCTOP_RETURN_IF_ERROR(Stmt(conn, sql::kInsertJob)
                              .Bind(":id", inserted.id)
                              .Bind(":queue", job.queue)
                              .Bind(":kind", job.kind)
                              .Bind(":payload", job.payload)
                              .Bind(":priority", std::int64_t{job.priority})
                              .Bind(":scheduled_at", scheduled_at)
                              .Bind(":max_retries", std::int64_t{job.max_retries})
                              .Bind(":now", now)
                              .BindOpt(":unique_key", job.unique_key)
                              .Run());
    out.push_back(std::move(inserted));
    AddQueue(queues, job.queue);
  }
  return out;
}

// The caller's own statement inside WithTransaction: prepared for this one use (not cached: arbitrary text),
// parameters bound as text by $N, ?N or position.
Result<SqlRows> ExecuteCallerStatement(Connection& conn, std::string_view text,
                                       const std::vector<std::optional<std::string>>& params) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(conn.db(), text.data(), static_cast<int>(text.size()), &raw, &tail);
  if (rc != SQLITE_OK) return SqliteError(conn.db(), rc, "preparing the caller's statement");
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
  if (!stmt) return InvalidArgumentError("Execute: the SQL text holds no statement");
  for (const char* p = tail; p != nullptr && p < text.data() + text.size(); ++p) {
    if (*p != ';' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
      return InvalidArgumentError("Execute runs exactly one statement; found more SQL after the first");
    }
  }
  const int count = sqlite3_bind_parameter_count(stmt.get());
  if (static_cast<std::size_t>(count) != params.size()) {
    return InvalidArgumentError("Execute: the statement has " + std::to_string(count) + " parameters, " +
                                std::to_string(params.size()) + " were given");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    int index = sqlite3_bind_parameter_index(stmt.get(), ("$" + n).c_str());
    if (index == 0) index = sqlite3_bind_parameter_index(stmt.get(), ("?" + n).c_str());
    if (index == 0 && sqlite3_bind_parameter_name(stmt.get(), static_cast<int>(i + 1)) == nullptr) {
      index = static_cast<int>(i + 1);
    }
    if (index == 0) return InvalidArgumentError("Execute: the statement has no parameter $" + n);
    rc = params[i] ? sqlite3_bind_text64(stmt.get(), index, params[i]->data(), params[i]->size(),
                                         SQLITE_TRANSIENT, SQLITE_UTF8)
                   : sqlite3_bind_null(stmt.get(), index);
    if (rc != SQLITE_OK) return SqliteError(conn.db(), rc, "binding a parameter");
  }
  SqlRows out;
  const sqlite3_int64 changes_before = sqlite3_total_changes64(conn.db());
  const int columns = sqlite3_column_count(stmt.get());
  for (int c = 0; c < columns; ++c) out.columns.emplace_back(sqlite3_column_name(stmt.get(), c));
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    std::vector<std::optional<std::string>> values;
    for (int c = 0; c < columns; ++c) {
      if (sqlite3_column_type(stmt.get(), c) == SQLITE_NULL) {
        values.emplace_back(std::nullopt);
      } else {
        const auto* p = sqlite3_column_text(stmt.get(), c);
        values.emplace_back(std::string(reinterpret_cast<const char*>(p),
                                        static_cast<std::size_t>(sqlite3_column_bytes(stmt.get(), c))));
      }
    }
    out.rows.push_back(std::move(values));
  }
  if (rc != SQLITE_DONE) return SqliteError(conn.db(), rc, "running the caller's statement");
  out.affected_rows = static_cast<long>(sqlite3_total_changes64(conn.db()) - changes_before);
  if (sqlite3_get_autocommit(conn.db()) != 0) {
    return FailedPreconditionError(
        "Execute: the statement ended the transaction (use WithTransaction's return)");
  }
  return out;
}

class SqliteTransaction final : public Transaction {
 public:
  SqliteTransaction(Connection& conn, std::string now) : conn_(conn), now_(std::move(now)) {}

  Result<SqlRows> Execute(std::string_view text,
                          const std::vector<std::optional<std::string>>& params) override {
    OCTOP_RETURN_IF_ERROR(StillOpen());
    return Kept(ExecuteCallerStatement(conn_, text, params));
  }

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(StillOpen());
    return Kept(EnqueueOnConnection(conn_, now_, jobs, queues_));
  }

  std::string_view backend() const override { return "sqlite"; }

  // The first failure: once a statement failed the transaction is rolled back whatever the callback returns.
  const std::optional<Status>& failure() const { return failure_; }
  const std::vector<std::string>& queues() const { return queues_; }

 private:
  Status StillOpen() const {
    if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
    return Status::Ok();
  }
  template <typename T>
  Result<T> Kept(Result<T> result) {
    if (!result.ok()) failure_ = result.status();
    return result;
  }

  Connection& conn_;
  const std::string now_;
  std::optional<Status> failure_;
  std::vector<std::string> queues_;
};

std::int64_t OutcomeCode(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSuccess:
      return 0;
    case JobOutcome::kRetry:
    case JobOutcome::kFail:
      return 1;
    case JobOutcome::kCancel:
      return 2;
    case JobOutcome::kRelease:
      return 3;
  }
  return -1;
}

bool ByClaimOrder(const JobInfo& a, const JobInfo& b) {
  return std::tie(a.priority, a.scheduled_at, a.id) < std::tie(b.priority, b.scheduled_at, b.id);
}

class SqliteJobStore final : public SqliteStoreBase<JobStore> {
 public:
  using NamespaceStore::NamespaceStore;

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    std::vector<std::string> queues;
    auto result = ns().Guard([&](Connection& conn) -> Result<std::vector<EnqueueResult>> {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> out, EnqueueOnConnection(conn, now, jobs, queues));
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      return out;
    });
    if (result.ok()) {
      for (const std::string& queue : queues) ns().hub().Publish(kJobsChannel, queue);
    }
    return result;
  }

  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override {
    std::vector<std::string> queues;
    Status status = ns().Guard([&](Connection& conn) -> Status {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      SqliteTransaction txn(conn, std::move(now));
      OCTOP_RETURN_IF_ERROR(fn(txn));  // ~ImmediateTransaction rolls back
      if (txn.failure()) return *txn.failure();
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      queues = txn.queues();
      return Status::Ok();
    });
    if (status.ok()) {
      for (const std::string& queue : queues) ns().hub().Publish(kJobsChannel, queue);
    }
    return status;
  }

  Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) override {
    std::optional<std::string> kinds;
    if (!params.kinds.empty()) kinds = TextsJson(params.kinds);
    return ns().Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt row(conn, sql::kClaimJobs);
      row.Bind(":now", now)
          .Bind(":timeout", OffsetModifier(params.timeout))
          .Bind(":worker_id", params.worker_id)
          .Bind(":queue", params.queue)
          .BindOpt(":kinds", kinds)
          .Bind(":limit", std::int64_t{params.limit});
      OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobRows(row));
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      std::sort(jobs.begin(), jobs.end(), ByClaimOrder);
      return jobs;
    });
  }

  Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<bool>> {
      std::vector<bool> applied(completions.size(), false);
      if (completions.empty()) return applied;
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      for (std::size_t i = 0; i < completions.size(); ++i) {
        const JobCompletion& c = completions[i];
        Stmt update(conn, sql::kCompleteJob);
        OCTOP_RETURN_IF_ERROR(update.Bind(":outcome", OutcomeCode(c.outcome))
                                  .Bind(":now", now)
                                  .Bind(":delay", OffsetModifier(c.retry_delay))
                                  .BindOpt(":error", c.error)
                                  .Bind(":id", c.id)
                                  .Bind(":token", c.attempt_token)
                                  .Bind(":cancelled_error", kJobCancelledError)
                                  .Run());
        applied[i] = update.Changes() == 1;
      }
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      return applied;
    });
  }

  Result<std::vector<RescuedJob>> RescueExpiredJobs(const RescueExpiredJobsParams& params) override {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    return ns().Guard([&](Connection& conn) -> Result<std::vector<RescuedJob>> {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      std::vector<RescuedJob> rescued;
      const std::string expired_before = SqliteNamespace::Earlier(now, params.expired_before);
      const std::string spare = TextsJson(params.spare_tokens);
      // The attempts asked to stop first (frozen), then the others (failed or frozen by their attempts).
      for (const bool cancelled : {true, false}) {
        Stmt row(conn, cancelled ? sql::kRescueCancelledJobs : sql::kRescueExpiredJobs);
        row.Bind(":now", now).Bind(":expired_before", expired_before).Bind(":spare_tokens", spare);
        if (cancelled) {
          row.Bind(":cancelled_error", kJobCancelledError);
        } else {
          row.Bind(":base_ms", duration_cast<milliseconds>(params.backoff_base).count())
              .Bind(":max_ms", duration_cast<milliseconds>(params.backoff_max).count())
              .Bind(":error", kJobTimedOutError);
        }
        while (row.Step()) {
          const auto status = ParseJobStatus(row.Text(1));
          rescued.push_back({row.Text(0), status.value_or(JobStatus::kFailed), static_cast<int>(row.Int(2))});
        }
        OCTOP_RETURN_IF_ERROR(row.status());
      }
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      std::sort(rescued.begin(), rescued.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      return rescued;
    });
  }

  Result<long> RenewJobLeases(const RenewJobLeasesParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<long> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt update(conn, sql::kRenewJobLeases);
      OCTOP_RETURN_IF_ERROR(update.Bind(":now", now)
                                .Bind(":lease", OffsetModifier(params.lease))
                                .Bind(":tokens", TextsJson(params.tokens))
                                .Run());
      return static_cast<long>(update.Changes());
    });
  }

  Status RetryJob(const RetryJobParams& params) override {
    std::string queue;
    Status status = ns().Guard([&](Connection& conn) -> Status {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      OCTOP_ASSIGN_OR_RETURN(std::optional<JobState> state, ReadJobState(conn, params.id));
      if (!state) return NoSuchJob(params.id);
      const std::string& current = state->status;
      const std::optional<std::string>& unique_key = state->unique_key;
      queue = state->queue;
      if (current != "failed" && current != "frozen") {
        return ConflictError("Job " + params.id + " is " + current +
                             ", only failed or frozen jobs can be retried");
      }
      if (unique_key && current == "frozen") {
        OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> holder, LiveJobWithKey(conn, *unique_key));
        if (holder) {
          return ConflictError("Job " + params.id + " cannot be retried: job " + *holder +
                               " holds its unique key " + *unique_key);
        }
      }
      OCTOP_RETURN_IF_ERROR(Stmt(conn, sql::kRetryJob).Bind(":id", params.id).Bind(":now", now).Run());
      return tx.Commit();
    });
    if (status.ok()) ns().hub().Publish(kJobsChannel, queue);
    return status;
  }

  Result<CancelJobResult> CancelJob(const CancelJobParams& params) override {
    Result<CancelJobResult> result = ns().Guard([&](Connection& conn) -> Result<CancelJobResult> {
      ImmediateTransaction tx(conn);
      OCTOP_RETURN_IF_ERROR(tx.Begin());
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt update(conn, sql::kCancelJob);
      OCTOP_RETURN_IF_ERROR(
          update.Bind(":id", params.id).Bind(":now", now).Bind(":error", kJobCancelledError).Run());
      if (update.Changes() == 1) {
        OCTOP_RETURN_IF_ERROR(tx.Commit());
        return CancelJobResult::kCancelled;
      }
      OCTOP_ASSIGN_OR_RETURN(std::optional<JobState> state, ReadJobState(conn, params.id));
      if (!state) return NoSuchJob(params.id);
      if (state->status != "running") return ConflictError("Job " + params.id + " has already finished");
      // Running: its worker owns the row; record the request for its attempt (docs/store.md §8.3 CancelJob).
      Stmt sweep(conn, sql::kSweepJobCancels);
      OCTOP_RETURN_IF_ERROR(sweep.Bind(":id", params.id).Run());
      Stmt request(conn, sql::kRequestJobCancel);
      OCTOP_RETURN_IF_ERROR(request.Bind(":id", params.id).Bind(":now", now).Run());
      OCTOP_RETURN_IF_ERROR(tx.Commit());
      return CancelJobResult::kStopRequested;
    });
    if (result.ok() && *result == CancelJobResult::kStopRequested) {
      ns().hub().Publish(kJobCancelChannel, params.id);
    }
    return result;
  }

  Result<std::vector<std::string>> CancelRequestsFor(const std::vector<std::string>& tokens) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
      Stmt row(conn, sql::kCancelRequestsFor);
      row.Bind(":tokens", TextsJson(tokens));
      std::vector<std::string> ids;
      while (row.Step()) ids.push_back(row.Text(0));
      OCTOP_RETURN_IF_ERROR(row.status());
      return ids;
    });
  }

  Result<JobInfo> GetJob(std::string_view id) override {
    return ns().Guard([&](Connection& conn) -> Result<JobInfo> {
      Stmt row(conn, sql::kGetJob);
      row.Bind(":id", id);
      OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobRows(row));
      if (jobs.empty()) return NoSuchJob(id);
      return std::move(jobs.front());
    });
  }

  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      Stmt row(conn, sql::kListJobs);
      if (params.status) {
        row.Bind(":status", JobStatusName(*params.status));
      } else {
        row.BindNull(":status");
      }
      row.BindOpt(":queue", params.queue)
          .BindOpt(":kind", params.kind)
          .Bind(":limit", std::int64_t{params.limit})
          .Bind(":offset", std::int64_t{params.offset});
      if (params.payload_budget) {
        row.Bind(":budget", std::max<std::int64_t>(0, *params.payload_budget));
      } else {
        row.BindNull(":budget");
      }
      std::vector<JobInfo> jobs;
      while (row.Step()) {
        jobs.push_back(ReadJobRow(row));
        if (!row.OptText(3)) jobs.back().omitted_payload_bytes = row.Int(17);
      }
      OCTOP_RETURN_IF_ERROR(row.status());
      return jobs;
    });
  }

  Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<JobInfo>> {
      Stmt row(conn, sql::kListFailedJobs);
      row.BindOpt(":queue", params.queue).Bind(":limit", std::int64_t{params.limit});
      return ReadJobRows(row);
    });
  }

  Result<std::vector<JobStatusCount>> SummarizeJobs() override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<JobStatusCount>> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      std::vector<JobStatusCount> counts;
      Stmt row(conn, sql::kJobSummary);
      row.Bind(":now", now);
      while (row.Step()) {
        JobStatusCount line;
        line.queue = row.Text(0);
        const auto status = ParseJobStatus(row.Text(1));
        if (!status) return InternalError("unknown job status '" + row.Text(1) + "'");
        line.status = *status;
        line.count = row.Int(2);
        line.oldest_scheduled_at = row.Time(3);
        if (!row.IsNull(4)) line.average_delay = std::chrono::milliseconds(row.Int(4));
        counts.push_back(std::move(line));
      }
      OCTOP_RETURN_IF_ERROR(row.status());
      std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
        return std::tie(a.queue, a.status) < std::tie(b.queue, b.status);
      });
      return counts;
    });
  }

  Result<JobStats> ComputeJobStats(const JobStatsFilter& params) override {
    return ns().Guard([&](Connection& conn) -> Result<JobStats> {
      OCTOP_ASSIGN_OR_RETURN(std::string now_text, ns().Now(conn));
      OCTOP_ASSIGN_OR_RETURN(WallTime now, SqliteNamespace::ParseNow(now_text));
      OCTOP_ASSIGN_OR_RETURN(JobStats stats, JobStatsGrid(params, now));
      const auto bucket_ms = std::chrono::duration_cast<std::chrono::milliseconds>(params.bucket).count();
      Stmt row(conn, sql::kJobStats);
      row.Bind(":from", FormatTime(stats.from))
          .Bind(":to", FormatTime(stats.to))
          .Bind(":bucket_ms", std::int64_t{bucket_ms})
          .BindOpt(":queue", params.queue)
          .BindOpt(":kind", params.kind);
      const auto ms = [&](int col) -> std::optional<std::chrono::microseconds> {
        if (row.IsNull(col)) return std::nullopt;
        return std::chrono::milliseconds(row.Int(col));
      };
      while (row.Step()) {
        const std::int64_t index = row.Int(0);
        if (index < 0 || index >= static_cast<std::int64_t>(stats.buckets.size())) continue;
        JobStatsBucket& b = stats.buckets[static_cast<std::size_t>(index)];
        b.succeeded = static_cast<long>(row.Int(1));
        b.frozen = static_cast<long>(row.Int(2));
        b.avg_latency = ms(3);
        b.max_latency = ms(4);
        b.avg_run = ms(5);
      }
      OCTOP_RETURN_IF_ERROR(row.status());
      return stats;
    });
  }

  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override {
    return ns().Guard([&](Connection& conn) -> Result<std::optional<WallTime>> {
      Stmt row(conn, sql::kNextJobDueAt);
      row.Bind(":queue", queue);
      std::optional<WallTime> due;
      if (row.Step()) due = row.Time(0);
      OCTOP_RETURN_IF_ERROR(row.status());
      return due;
    });
  }

  Status SetQueuePaused(std::string_view queue, bool paused) override {
    Status status = ns().Guard([&](Connection& conn) -> Status {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      return Stmt(conn, sql::kSetQueuePaused)
          .Bind(":queue", queue)
          .Bind(":paused", std::int64_t{paused ? 1 : 0})
          .Bind(":now", now)
          .Run();
    });
    if (status.ok() && !paused) ns().hub().Publish(kJobsChannel, queue);
    return status;
  }

  Result<std::vector<QueueInfo>> ListQueues() override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<QueueInfo>> {
      Stmt row(conn, sql::kListQueues);
      std::vector<QueueInfo> queues;
      while (row.Step()) queues.push_back({row.Text(0), row.Int(1) != 0});
      OCTOP_RETURN_IF_ERROR(row.status());
      return queues;
    });
  }

  Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) override {
    nlohmann::json statuses = nlohmann::json::array();
    for (JobStatus s : params.statuses) statuses.push_back(std::string(JobStatusName(s)));
    return ns().Guard([&](Connection& conn) -> Result<long> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      OCTOP_ASSIGN_OR_RETURN(std::string cutoff, JobTimeAfter(conn, now, -params.older_than));
      Stmt del(conn, sql::kDeleteFinishedJobs);
      OCTOP_RETURN_IF_ERROR(del.Bind(":statuses", statuses.dump())
                                .Bind(":cutoff", cutoff)
                                .Bind(":limit", std::int64_t{params.limit})
                                .Run());
      return static_cast<long>(del.Changes());
    });
  }

  // Claims read octop_jobs by status and the unique index is on octop_jobs: a job written by SQL is already
  // what its row says (docs/jobs.md "Jobs written by SQL").
  Result<long> ReconcileJobSets() override { return 0L; }

  Result<std::optional<std::string>> GetConfig(std::string_view key) override {
    return ns().Guard([&](Connection& conn) -> Result<std::optional<std::string>> {
      Stmt row(conn, sql::kGetConfig);
      row.Bind(":key", key);
      std::optional<std::string> value;
      if (row.Step()) value = row.Text(0);
      OCTOP_RETURN_IF_ERROR(row.status());
      return value;
    });
  }

  Status SetConfig(std::string_view key, std::string_view value_json) override {
    Status status = ns().Guard([&](Connection& conn) -> Status {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      return Stmt(conn, sql::kSetConfig).Bind(":key", key).Bind(":value", value_json).Bind(":now", now).Run();
    });
    if (status.ok()) ns().hub().Publish(kConfigChannel, key);
    return status;
  }
};

}  // namespace

}  // namespace octop::store::sqlite

namespace octop::store {

Result<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& location,
                                                     const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::SqliteNamespace> ns,
                         sqlite::SqliteNamespace::Open(location, options));
  return std::unique_ptr<JobStore>(
      std::make_unique<sqlite::SqliteJobStore>(std::move(ns), MigrationLine::kJobs));
}

}  // namespace octop::store
