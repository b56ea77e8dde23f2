// The job queue's vocabulary: a job's statuses, what enqueueing takes and returns, a job as stored, the
// filters and summaries an operator reads. One set of types for every layer -- the store writes and reads
// them, JobQueue hands them to callers, the REST API and the CLI print them (docs/jobs.md).
//
// Statuses, and who moves a job between them:
//   pending --claim--> running --success--> success
//                         |--failed attempt, retries left--> failed --(scheduled_at reached) claim--> running
//                         |--failed attempt, none left, or cancelled--> frozen (the dead letter)
//                         `--lease expired (its node died or hung): the rescuer, as a failed attempt
//   pending/failed --cancel--> frozen;  failed/frozen --retry--> pending
// `attempt` counts claims (1 while the first run is running): a job runs at most 1 + max_retries times.
//
// Thread-safety: plain values.
#ifndef OCTOP_JOB_H_
#define OCTOP_JOB_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>

namespace octop {

enum class JobStatus { kPending, kRunning, kSuccess, kFailed, kFrozen };

// "pending", "running", "success", "failed", "frozen" (the status column's values).
constexpr std::string_view JobStatusName(JobStatus status) {
  switch (status) {
    case JobStatus::kPending:
      return "pending";
    case JobStatus::kRunning:
      return "running";
    case JobStatus::kSuccess:
      return "success";
    case JobStatus::kFailed:
      return "failed";
    case JobStatus::kFrozen:
      return "frozen";
  }
  return "pending";
}

constexpr std::optional<JobStatus> ParseJobStatus(std::string_view name) {
  for (JobStatus s : {JobStatus::kPending, JobStatus::kRunning, JobStatus::kSuccess, JobStatus::kFailed,
                      JobStatus::kFrozen}) {
    if (JobStatusName(s) == name) return s;
  }
  return std::nullopt;
}

// The last_error of a job cancelled by an operator, and of an attempt whose lease ran out.
inline constexpr std::string_view kJobCancelledError = "Job was cancelled";
inline constexpr std::string_view kJobTimedOutError = "Job timed out (worker lost)";

// One job to enqueue. Checked before anything is written (InvalidArgument names the item and the field).
struct JobSpec {
  std::string kind;                      // required, 1..255 bytes of UTF-8
  std::string payload = "{}";            // JSON text (any JSON value); must parse
  std::string queue = "default";         // 1..255 bytes
  int priority = 0;                      // lower runs first among due jobs of a queue
  std::optional<WallTime> scheduled_at;  // not before this instant; absent = now (the database's clock)
  int max_retries = 3;                   // retries after the first attempt, >= 0
  // While a job with this key is pending, running or failed (awaiting a retry), enqueueing the same key
  // returns that job instead of adding one: atomic under concurrency. Keys are unique across queues and
  // kinds. 1..255 bytes.
  std::optional<std::string> unique_key;
};

struct EnqueueResult {
  std::string id;         // a UUID
  bool existing = false;  // true: a live job had the same unique_key; `id` is that job's, nothing was added
  friend bool operator==(const EnqueueResult&, const EnqueueResult&) = default;
};

// One job as stored.
struct JobInfo {
  std::string id;
  std::string queue;
  std::string kind;
  std::string payload;  // JSON text; PostgreSQL returns jsonb's normalised text: compare parsed
  int priority = 0;
  WallTime scheduled_at;
  JobStatus status = JobStatus::kPending;
  int attempt = 0;  // attempts started so far (claims)
  int max_retries = 0;
  std::optional<std::string> attempt_token;  // the fencing token of the latest claim
  std::optional<std::string> last_error;
  WallTime created_at;
  std::optional<WallTime> started_at;    // the latest claim
  std::optional<WallTime> completed_at;  // set on success and frozen
  std::optional<WallTime> expires_at;    // while running: when the rescuer may take the job back
  std::optional<std::string> unique_key;
  std::optional<std::string> worker_id;  // who claimed it last
  // Set by a listing that left the payload out for its budget (JobFilter::payload_budget): the payload's
  // size in bytes; `payload` is then empty.
  std::optional<std::int64_t> omitted_payload_bytes;
};

// A listing, newest first (created_at, then id, descending).
struct JobFilter {
  std::optional<JobStatus> status;
  std::optional<std::string> queue;
  std::optional<std::string> kind;
  int limit = 50;  // 1..1000
  int offset = 0;
  // Bytes of payload text the answer may carry, counted newest first: a payload that would go past it is left
  // out (JobInfo::omitted_payload_bytes). nullopt: every payload. Bounds a listing's memory, not only its
  // rows.
  std::optional<std::int64_t> payload_budget;
};

// Jobs of one queue in one status (the octop_job_summary view).
struct JobStatusCount {
  std::string queue;
  JobStatus status = JobStatus::kPending;
  std::int64_t count = 0;
  std::optional<WallTime> oldest_scheduled_at;
  // pending/failed: the mean waiting time so far of the due ones; running/success/frozen: the mean start
  // delay (started_at - scheduled_at) of those started in the last hour. Absent when none qualifies.
  std::optional<std::chrono::microseconds> average_delay;
};

struct JobSummary {
  std::vector<JobStatusCount> counts;  // by queue, then status in enum order
  std::vector<JobInfo> latest_failed;  // failed and frozen jobs, most recently failed first (at most 10)
  std::vector<std::string> paused_queues;
};

struct QueueInfo {
  std::string name;
  bool paused = false;
};

// Throughput and latency of finished jobs over a recent window (the dashboard's sparkline), read from the
// rows retention keeps. Buckets are aligned to multiples of `bucket` since the epoch, so successive calls
// show the same buckets: `to` is the end of the bucket holding the database's now, `from` = to - n * bucket
// with n = ceil(window / bucket). A job counts in the bucket of its completed_at (success and frozen set it;
// a failed job waiting for its retry has none). window 1 s .. 7 days; bucket at least 1 s and a whole
// number of milliseconds; n <= kMaxJobStatsBuckets; InvalidArgument otherwise. queue/kind: nullopt = any.
struct JobStatsFilter {
  std::chrono::microseconds window{std::chrono::hours(1)};
  std::chrono::microseconds bucket{std::chrono::minutes(1)};
  std::optional<std::string> queue;
  std::optional<std::string> kind;
};
inline constexpr int kMaxJobStatsBuckets = 1440;

struct JobStatsBucket {
  WallTime start;              // the bucket is [start, start + bucket)
  std::int64_t succeeded = 0;  // ended success
  std::int64_t frozen = 0;     // ended frozen: attempts used up, or cancelled
  // Over the succeeded jobs only (a cancelled job's started_at belongs to an earlier attempt): pickup latency
  // started_at - scheduled_at of the last attempt (scheduled_at is the retry's due time after a failure), and
  // run time completed_at - started_at. nullopt when nothing succeeded in the bucket.
  std::optional<std::chrono::microseconds> avg_latency;
  std::optional<std::chrono::microseconds> max_latency;
  std::optional<std::chrono::microseconds> avg_run;
};

struct JobStats {
  WallTime db_now;
  WallTime from;
  WallTime to;
  std::chrono::microseconds bucket{0};
  std::vector<JobStatsBucket> buckets;  // all n of them, oldest first, empty ones included
};

}  // namespace octop

#endif  // OCTOP_JOB_H_
