// RunLogChecks: the chaos test's invariants, evaluated over what the database recorded — the append-only run
// log written by the task and job commands, and the audit trails that triggers append on every ownership
// change of a task row (its run ticket) and of a job row (status / attempt token). Pure functions over plain
// values, so the checks themselves are unit-tested with hand-made histories (run_log_checks_test.cc).
//
// Every time is seconds since the epoch on the database's clock (clock_timestamp()), never a node's.
// Node names are octopd incarnations ("n2.3"): the application_name / worker_id each one connects with.
//
// Thread-safety: plain values and pure functions.
#ifndef OCTOP_TESTS_CHAOS_RUN_LOG_CHECKS_H_
#define OCTOP_TESTS_CHAOS_RUN_LOG_CHECKS_H_

#include <optional>
#include <string>
#include <vector>

namespace octop::chaos {

// One execution of a task's or a job's command: its 'start' row and, when written, its 'end' row.
struct Run {
  std::string kind;  // "task" or "job"
  std::string key;   // task id or job id
  std::string node;
  std::string run_id;
  int attempt = 0;  // the job's attempt (OCTOP_JOB_ATTEMPT); 0 for tasks
  double start = 0;
  std::optional<double> end;
  std::string result;     // "ok", "fail", "killed", "" when no end row
  bool has_start = true;  // false: only the end row was written; `start` is then the end
};

// One row of the task audit: the task row's current_run_ticket changed from old_ticket to new_ticket.
struct TaskAudit {
  double at = 0;
  std::string app;  // application_name of the session that wrote it
  std::string task;
  std::optional<std::string> old_ticket;
  std::optional<std::string> new_ticket;
  std::optional<double> new_expires;  // the claim's current_run_expires_at
  bool ended_changed = false;         // last_run_ended_at written: a release, not a janitor sweep
};

// One row of the job audit: status or attempt token of a job changed.
struct JobAudit {
  double at = 0;
  std::string app;
  std::string job;
  std::string old_status;
  std::string new_status;
  std::optional<std::string> old_token;
  std::optional<std::string> new_token;
  std::optional<double> old_expires;  // expires_at of the attempt that ended
  std::optional<double> new_expires;
  std::string new_error;
  int new_attempt = 0;
};

// The final state of one job row.
struct JobInfo {
  std::string id;
  std::string status;
  int attempt = 0;
  int max_retries = 0;
};

// What the checks found: violations (each one line, precise enough to find the rows) and figures.
struct CheckReport {
  std::vector<std::string> violations;
  int task_runs = 0;
  int task_claims = 0;
  int tickets_swept = 0;  // runs whose ticket the janitor reclaimed after expiry
  int allowed_overlaps =
      0;  // task runs overlapping an earlier run whose ticket had expired and been reclaimed
  double max_overlap_s = 0;  // the longest such overlap
  int job_runs = 0;
  int jobs = 0;
  int jobs_success = 0;
  int jobs_frozen = 0;
  int retries = 0;  // sum over jobs of attempt - 1
  int jobs_rescued = 0;
};

// Builds runs from run-log rows (start/end pairs by run id). A run killed while it logged its start has only
// its end row; the checks then let it start at its claim (the earliest it can have started).
struct RunLogRow {
  std::string kind, key, node, run_id, event, detail;
  int attempt = 0;
  double at = 0;
};
std::vector<Run> PairRuns(const std::vector<RunLogRow>& rows);

// A run without an end row (its command was SIGKILLed after the kill grace, or could not log) ended at the
// latest when its node released the run: octopd reaps the command's process group before releasing.
//
// Global tasks: no two runs of one task overlap, except when the earlier run's ticket had expired and the
// janitor had reclaimed it before the later run started. Every run maps to a claim of its node. Fencing: a
// ticket is claimed from NULL only, cleared at most once, and released (last_run_ended_at written) only by
// the session that claimed it — a node that woke up after its ticket was swept cannot write over the new
// owner's run.
void CheckTasks(const std::vector<Run>& runs, const std::vector<TaskAudit>& audit, CheckReport& report);

// Jobs: every enqueued id exists and is final (success or frozen); attempts never exceed 1 + max_retries (in
// the table and in the run log); a success has a run of its final attempt that ended ok; a job never runs
// concurrently with itself; an attempt is completed only by the node that claimed it, or by a rescuer after
// its expiry.
void CheckJobs(const std::vector<Run>& runs, const std::vector<JobAudit>& audit,
               const std::vector<JobInfo>& jobs, const std::vector<std::string>& enqueued_ids,
               CheckReport& report);

}  // namespace octop::chaos

#endif  // OCTOP_TESTS_CHAOS_RUN_LOG_CHECKS_H_
