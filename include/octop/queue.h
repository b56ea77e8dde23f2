// The octop job queue: durable jobs in the database (table octop_jobs of namespace "octop"), run by handlers
// registered per job kind, on workers per queue, across any number of nodes sharing the database.
//
// Model (docs/jobs.md has the details): a job is {kind, JSON payload, queue, priority, scheduled_at,
// max_retries, unique_key}. It is `pending` until a node claims it (one statement, FOR UPDATE SKIP LOCKED on
// PostgreSQL, BEGIN IMMEDIATE on SQLite), `running` while its handler runs, and ends `success`; when an
// attempt fails it is `failed` (waiting for its retry after an exponential backoff with jitter) until 1 +
// max_retries attempts are used up: then it is `frozen` (the dead letter; kept for inspection and manual
// retry). A cancelled job is frozen too. Every claim carries a fresh attempt token; a completion whose token
// is no longer the job's (the job was rescued from this node and re-claimed elsewhere) is rejected, so a late
// worker can never overwrite a newer attempt: delivery is at-least-once.
//
// Threads (per JobQueue, none per job): per queue one producer that claims in batches of up to the free
// worker slots and supervises timeouts, and a fixed pool of `concurrency` worker threads; one completer that
// writes finished attempts in batches; one listener that turns enqueue notifications (PostgreSQL NOTIFY;
// SQLite: an in-process broker) into immediate claims; one maintenance thread (rescuer of expired runs,
// retention cleanup, re-reading the octop_config table). Enqueue in this process wakes the producers
// directly.
//
// Ownership: a JobQueue owns its database connections, its handlers (copied in) and all of its threads.
// Handlers must return soon after their stop_token fires (timeout, Shutdown()).
//
// Thread-safety: every method may be called from any thread concurrently, including from inside a handler
// (except Shutdown(), which waits for handlers to return). RegisterHandler/AddWorkers may be called before or
// after Start().
#ifndef OCTOP_QUEUE_H_
#define OCTOP_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>
#include <octop/job.h>
#include <octop/logger.h>
#include <octop/postgres_pooling.h>
#include <octop/status.h>
#include <octop/transaction.h>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace octop {

namespace runtime {
struct JobQueueOpener;  // internal: opens a queue on a store of the caller's (tests, benchmarks)
}  // namespace runtime

// ---- Handlers ---------------------------------------------------------------------------------------------

// The longest delay a handler's JobResult::Retry(after) can ask for; a longer one (or a negative one) is
// clamped to it (to 0), so a webhook's Retry-After cannot park a job for decades.
inline constexpr std::chrono::milliseconds kMaxJobRetryAfter = std::chrono::hours(24);

// What a handler hands back.
class JobResult {
 public:
  enum class Kind { kDone, kRetry, kFail, kCancel };

  // The job succeeded.
  static JobResult Done() { return JobResult(Kind::kDone, {}, std::nullopt); }
  // Try again: after `after` (clamped to 0..kMaxJobRetryAfter), or after the backoff when absent. Counts as
  // an attempt: once max_retries retries are used up the job is frozen with `error`.
  static JobResult Retry(std::optional<std::chrono::milliseconds> after = std::nullopt,
                         std::string error = "retry requested") {
    return JobResult(Kind::kRetry, std::move(error), after);
  }
  // The attempt failed: retried after the backoff while retries remain, else frozen. (A thrown exception is
  // Fail(what()).)
  static JobResult Fail(std::string error) { return JobResult(Kind::kFail, std::move(error), std::nullopt); }
  // Give up now, whatever the retries left: the job ends `frozen` with `error`.
  static JobResult Cancel(std::string error) {
    return JobResult(Kind::kCancel, std::move(error), std::nullopt);
  }

  Kind kind() const { return kind_; }
  const std::string& error() const { return error_; }
  const std::optional<std::chrono::milliseconds>& retry_after() const { return after_; }

 private:
  JobResult(Kind kind, std::string error, std::optional<std::chrono::milliseconds> after)
      : kind_(kind), error_(std::move(error)), after_(after) {}
  Kind kind_;
  std::string error_;
  std::optional<std::chrono::milliseconds> after_;
};

// What a handler receives. Valid for the duration of the call.
struct JobContext {
  std::string id;
  std::string kind;
  std::string queue;
  std::string payload;  // JSON text
  int attempt = 1;      // 1 for the first run
  int max_retries = 0;
  std::stop_token stop_token;  // fires on the job's timeout and on Shutdown() after the grace period
};

using JobHandler = std::function<JobResult(const JobContext&)>;

struct JobHandlerOptions {
  // How long one attempt may run before its stop_token fires and it counts as failed. Absent: the config
  // table's "jobs.default_timeout_ms" (default 5 minutes), re-read while running.
  std::optional<std::chrono::milliseconds> timeout;
};

// delay(attempt) = min(base * 2^(attempt-1), cap), then multiplied by a uniform random factor in
// [1 - jitter, 1 + jitter]. attempt is the attempt that just failed (1 for the first run).
struct RetryPolicy {
  std::chrono::milliseconds base{1000};
  std::chrono::milliseconds cap{std::chrono::hours(1)};
  double jitter = 0.2;  // 0..1

  // The delay before the retry that follows failed attempt `attempt` (>= 1); `unit_random` in [0, 1).
  std::chrono::milliseconds Delay(int attempt, double unit_random) const;
};

// ---- The queue --------------------------------------------------------------------------------------------

struct JobQueueOptions {
  // "sqlite:<directory>", "sqlite::memory:" or "postgresql://...". Default "sqlite:." (the working
  // directory).
  std::string database_url = "sqlite:.";
  // On PostgreSQL behind a pooler in transaction mode: no prepared statements, LISTEN elsewhere
  // (octop/postgres_pooling.h).
  PostgresPooling pooling;
  // Time source for every wait and timestamp (and the database's "now" in tests). Must outlive the queue.
  Clock* clock = &Clock::Real();
  // Log sink; default spdlog's default logger.
  Logger logger;
  // Where the octop_jobs_* metrics are registered; default a registry of the queue's own.
  std::shared_ptr<prometheus::Registry> metrics_registry;
  // Stored with each claim (worker_id column) for diagnostics. Default "<hostname>-<pid>".
  std::string worker_id;
  // The backoff of failed attempts; the rescuer uses its base and cap (without jitter) for lost runs.
  RetryPolicy retry;
  // How often expired running jobs (their node died or hung past timeout + rescue_grace) go back to pending.
  // Default 15 s; zero disables the rescuer.
  std::chrono::milliseconds rescue_interval{15000};
  // Added to a job's timeout to form its expiry in the database, so that this node's own timeout stop lands
  // before another node may rescue the job. Default 5 s.
  std::chrono::milliseconds rescue_grace{5000};
  // Finished jobs (success, failed, frozen) older than this are deleted, checked every retention_interval
  // (the first time a second after Start, so that a starting node claims first). Defaults: 7 days, every
  // hour. A zero interval disables the cleanup.
  std::chrono::hours retention{24 * 7};
  std::chrono::milliseconds retention_interval{std::chrono::hours(1)};
  // Jobs that plain SQL UPDATEd or DELETEd are reconciled with the queue's working sets, so a DBA's
  // `UPDATE octop_jobs SET status = 'pending'` retries a job and an UPDATE of scheduled_at moves it
  // (docs/jobs.md "Jobs written by SQL"; a job INSERTed by SQL is registered at once). On PostgreSQL such a
  // statement notifies every node, which reconciles within moments; this is the period of the pass that also
  // runs without one (a change no notification reached); the first pass runs a second after Start. Each pass
  // reads every job; SQLite needs none.
  // Default 5 min; zero disables the periodic pass (not the notified ones).
  std::chrono::milliseconds reconcile_interval{std::chrono::minutes(5)};
  // How often the octop_config table (jobs.poll_interval_ms, jobs.default_timeout_ms) and the paused queues
  // are re-read. Default 5 s.
  std::chrono::milliseconds config_refresh_interval{5000};
  // Prefetch (graphile-worker's "local queue"): each queue's producer may claim up to this many jobs beyond
  // its free worker slots and hold them on this node, so one claim statement serves many jobs. It claims
  // again when fewer than half of them are left waiting. A held job that has not started within prefetch_ttl
  // is handed back to the queue unchanged (attempt and status as before its claim), and so is every held job
  // at Shutdown. While held, a job cannot run on another node: keep it small when a queue's jobs are long.
  // Default 0: claim only for free slots. 0..1000.
  int prefetch = 0;
  // Default 10 s. A claim holding prefetched jobs sets their expiry to timeout + rescue_grace + prefetch_ttl.
  std::chrono::milliseconds prefetch_ttl{10000};
  // The shortest time from the end of one claim of a queue to the next claim that a wake-up (an enqueue on
  // this node or a database notification) starts: a wake-up sooner than that waits out the rest, and the jobs
  // enqueued meanwhile share one claim. An idle queue's last claim is older, so its jobs start at once; under
  // a stream of enqueues it bounds the claims to one per interval per queue and adds at most the interval to
  // a job's start. Claims for freed slots, due jobs and polls are not held back. Default 1 ms; 0 claims on
  // every wake-up. 0..100 ms (real time, also under a FakeClock).
  std::chrono::microseconds wake_claim_interval{1000};
  // Completions are written when this many are waiting, or this long after the first one. Defaults 256, 2 ms.
  std::size_t completion_batch = 256;
  std::chrono::milliseconds completion_flush_interval{2};
  // Shutdown: how long running handlers may go on before their stop_tokens fire. Default 10 s.
  std::chrono::milliseconds shutdown_grace{10000};
  // Fallbacks when the config table has no value. Defaults 1 s and 5 min.
  std::chrono::milliseconds default_poll_interval{1000};
  std::chrono::milliseconds default_timeout{std::chrono::minutes(5)};
};

// Config table keys (values are JSON numbers).
inline constexpr std::string_view kJobsPollIntervalKey = "jobs.poll_interval_ms";
inline constexpr std::string_view kJobsDefaultTimeoutKey = "jobs.default_timeout_ms";

class JobQueue {
 public:
  // Opens (and migrates) the store. Nothing runs until Start().
  static Result<std::unique_ptr<JobQueue>> Open(JobQueueOptions options = {});
  ~JobQueue();  // Shutdown()
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // ---- Producing
  // InvalidArgument for a bad spec (nothing written). Wakes idle workers of the job's queue on every node.
  Result<EnqueueResult> Enqueue(const JobSpec& spec);
  // All or nothing, in one transaction; results in the order of `specs`.
  Result<std::vector<EnqueueResult>> EnqueueMany(const std::vector<JobSpec>& specs);
  // Runs fn inside one transaction of the queue's database, on one connection: commits when fn returns OK
  // (and every statement succeeded), rolls back otherwise and returns fn's error (or the commit's). Inside fn
  // call only EnqueueTx of this queue (its other methods may wait for the connection fn holds). SQLite: BEGIN
  // IMMEDIATE, so fn holds the database's write lock: keep it short.
  Status WithTransaction(const std::function<Status(Transaction&)>& fn);
  // Inside the caller's transaction: the job exists if and only if the transaction commits. Workers
  // everywhere are woken by the notification sent at commit.
  Result<EnqueueResult> EnqueueTx(Transaction& tx, const JobSpec& spec);
  // Makes every producer of this process claim now.
  void WakeAll();

  // ---- Consuming
  // The handler of `kind` (replacing an earlier one). Jobs of kinds without a handler on this node are left
  // for other nodes.
  Status RegisterHandler(std::string kind, JobHandler handler, JobHandlerOptions options = {});
  // Runs workers for `queue` with this many slots (1..1024). Called again for a queue: the larger count wins.
  Status AddWorkers(std::string queue, int concurrency);
  // Starts the producers, completer, listener and maintenance threads. FailedPrecondition after Shutdown().
  Status Start();
  // Stops claiming, lets running handlers finish for shutdown_grace (then fires their stop_tokens and waits),
  // writes every pending completion, joins every thread. Idempotent.
  void Shutdown();

  // ---- Managing (what the REST API and the CLI call)
  Result<JobInfo> GetJob(std::string_view id);                     // NotFound "Job <id> does not exist"
  Result<std::vector<JobInfo>> ListJobs(const JobFilter& filter);  // InvalidArgument for a bad limit
  Result<JobSummary> Summarize();
  // Finished jobs per time bucket over a recent window (the dashboard's sparkline); InvalidArgument for a
  // window or bucket out of range (JobStatsFilter).
  Result<JobStats> Stats(const JobStatsFilter& filter);
  // A failed or frozen job back to pending, due now; a frozen job that used up its retries gets exactly one
  // more attempt. NotFound "Job <id> does not exist"; Conflict "Job <id> is <status>" for
  // pending/running/success, or when another live job holds its unique key.
  Status RetryJob(std::string_view id);
  // A pending or failed job becomes frozen with "Job was cancelled". A running job, on any node: its attempt
  // is asked to stop -- the stop_token of its handler fires (at once here; on another node when it hears the
  // notification, or at its next rescue pass if it missed it) -- and unless it succeeds anyway it ends frozen
  // with that error, never to be retried (docs/jobs.md, "Cancelling a running job"). NotFound "Job <id> does
  // not exist"; Conflict "Job <id> has already finished".
  Status CancelJob(std::string_view id);
  Status PauseQueue(std::string_view queue);
  Status ResumeQueue(std::string_view queue);
  // Writes a config value (JSON text) to the octop_config table; every node applies it at its next refresh.
  Status SetConfig(std::string_view key, std::string_view json_value);

  // octop_jobs_enqueued_total{queue,kind}, octop_jobs_completed_total{queue,kind,result},
  // octop_jobs_duration_seconds{queue,kind} (histogram), octop_jobs_start_latency_seconds{queue} (histogram
  // of enqueue/scheduled -> start), octop_jobs_running{queue} (gauge),
  // octop_jobs_claim_duration_seconds{queue} (histogram), octop_jobs_claimed_total{queue},
  // octop_jobs_rescued_total, octop_jobs_deleted_total. A completion rejected by its token counts as result
  // "fenced".
  std::shared_ptr<prometheus::Registry> metrics_registry() const;

  // The poll interval and default timeout in effect (from the config table or the options).
  std::chrono::milliseconds poll_interval() const;
  std::chrono::milliseconds default_timeout() const;

  class Impl;

 private:
  friend struct runtime::JobQueueOpener;
  explicit JobQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace octop

#endif  // OCTOP_QUEUE_H_
