// JobQueueWorker: the workers of one queue on this node -- a producer thread and a fixed pool of
// `concurrency` worker threads.
//
// The producer claims due jobs in one ClaimJobs statement per batch, up to the free worker slots plus the
// queue's prefetch (JobQueueOptions::prefetch, default 0), and hands them to the pool. Prefetched jobs wait
// in the pool's ready list; the producer claims again once fewer than half of the prefetch are waiting, and
// hands back (JobOutcome::kRelease) a job that waited longer than prefetch_ttl (a worker taking such a job
// hands it back instead of starting it), and at Shutdown every job that has not started. A job's timeout
// counts from its start, not its claim. It claims when woken (an enqueue in this process, a database
// notification, a slot freed while more jobs may be waiting), when the next job of the queue becomes due
// (NextJobDueAt, translated to this node's clock), and at the poll interval (the fallback for missed
// notifications). A wake-up that comes within JobQueueOptions::wake_claim_interval of the end of the previous
// claim waits until that interval has passed, so a stream of enqueues is claimed a few jobs at a time instead
// of one claim (and one next-due read) per job; an idle queue claims at once. It also supervises the running
// jobs: at a job's timeout its stop_token fires. Workers run the handler, turn its JobResult (or exception)
// into a completion with the backoff of the retry policy, and pass it to the JobCompleter.
//
// Waits read the context's clock (FakeClock in tests), except the shutdown grace and the wake-up pacing
// (wake_claim_interval, at most 100 ms), which are real time.
//
// Ownership: owned by JobQueue::Impl; borrows the context and the completer, which outlive it.
// Thread-safety: all public methods may be called from any thread.
#ifndef OCTOP_RUNTIME_JOB_WORKER_H_
#define OCTOP_RUNTIME_JOB_WORKER_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "runtime/job_completer.h"
#include "runtime/job_queue_context.h"

namespace octop::runtime {

class JobQueueWorker {
 public:
  JobQueueWorker(JobQueueContext& context, JobCompleter& completer, std::string queue, int concurrency);
  ~JobQueueWorker();  // Shutdown(0)
  JobQueueWorker(const JobQueueWorker&) = delete;
  JobQueueWorker& operator=(const JobQueueWorker&) = delete;

  const std::string& queue() const { return queue_; }

  void Start();
  // Raises the number of worker threads (never lowers it).
  void Grow(int concurrency);
  // Claim now: a job of this queue may be due.
  void Notify();
  // Known from the config refresh: a paused queue is not claimed from (the store refuses anyway; this saves
  // the statements and keeps NextJobDueAt from waking the producer for jobs it may not take).
  void SetPaused(bool paused);
  // If `id` runs here: its stop_token fires and its attempt ends with kCancel. Returns whether it runs here.
  bool CancelRunning(const std::string& id);
  // The attempt tokens of the jobs this node holds (claimed and not yet finished), each once.
  std::vector<std::string> HeldTokens() const;
  // The lease a claim takes now: the longest handler timeout plus the rescue grace (and the prefetch time to
  // live when the queue prefetches).
  std::chrono::milliseconds ClaimLease() const;
  // Stops claiming; running handlers get `grace` (real time) to finish, then their stop_tokens fire; waits
  // for all of them and joins every thread. Their completions are handed to the completer. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Run {
    JobInfo row;
    std::stop_source stop;
    // The handler and metric series as of the claim: the worker that starts the job takes no lock to find
    // them (a handler registered after the claim runs from the next claim on).
    std::shared_ptr<const JobHandlerRegistry::Entry> entry;
    JobMetrics::Series series;
    std::chrono::milliseconds timeout{0};
    SteadyTime claimed_at;     // this node's clock, right after the claim returned
    SteadyTime deadline;       // guarded by mu_; set at the start
    bool started = false;      // guarded by mu_: taken off ready_ by a worker
    bool timed_out = false;    // guarded by mu_
    bool cancelled = false;    // guarded by mu_
    bool interrupted = false;  // guarded by mu_: stopped by Shutdown after the grace
  };

  void ProducerLoop(std::stop_token stop);
  void WorkerLoop();
  // One claim; returns whether to claim again as soon as a slot is free (it filled every free slot, or a job
  // became due while it ran).
  bool Claim(int free, SteadyTime now);
  // Runs a job a worker took off ready_; `cancelled_before_start` as read when it was taken.
  void Execute(const std::shared_ptr<Run>& run, bool cancelled_before_start);
  // How many jobs the producer should claim now (0: none): the free slots of concurrency + prefetch, once at
  // most half of the prefetch is left waiting.
  int WantLocked() const;
  // Whether to notify one more worker for ready_ (and records it): jobs are ready, a worker waits, and no
  // notified worker is still on its way (it takes a job and wakes the next in its turn).
  bool WakeWorkerLocked();
  // Whether a job held (claimed, not started) since run.claimed_at has outlived prefetch_ttl at `now`.
  bool PastTtl(const Run& run, SteadyTime now) const;
  // Drops a claimed job from this node's books (running_, busy_): it finished, or it is handed back unrun.
  void ForgetLocked(const Run& run);
  // Hands jobs that never started back to the queue, through the completer.
  void Release(std::vector<std::shared_ptr<Run>> held, const char* why);
  PendingCompletion Complete(const Run& run, JobResult result, bool timed_out, bool cancelled,
                             bool interrupted);
  std::chrono::milliseconds Backoff(int attempt);

  JobQueueContext& context_;
  JobCompleter& completer_;
  const std::string queue_;
  const int prefetch_;
  const std::chrono::milliseconds prefetch_ttl_;
  const JobMetrics::ClaimSeries claim_series_;  // this queue's claim instruments (the producer's)

  WakeSignal wake_;                // the producer's
  std::atomic<bool> dirty_{true};  // a claim may find something: set by Notify (an enqueue, a resume)
  std::atomic<bool> paused_{false};
  std::stop_source producer_stop_;

  // Producer thread only.
  std::vector<std::string> kinds_;
  std::uint64_t kinds_version_ = ~std::uint64_t{0};
  std::optional<SteadyTime> next_due_;
  SteadyTime last_claim_{};
  std::chrono::steady_clock::time_point last_claim_real_{};  // the end of the last claim, in real time
  int early_polls_ = 0;
  std::map<std::string, JobMetrics::Series, std::less<>> series_;  // per kind claimed
  bool waiting_for_slot_ = false;  // guarded by mu_: the producer found nothing to claim for and waits
  int idle_workers_ = 0;           // guarded by mu_: workers waiting on work_cv_
  // Guarded by mu_: a worker was notified for ready_ and no waiting worker has woken since. A flag, not a
  // count: a notification can wake nobody (its worker had already woken), and a count would then stay up.
  bool worker_waking_ = false;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // guarded by rng_mu_

  mutable std::mutex mu_;
  std::condition_variable work_cv_;                      // workers wait for ready_ or stopping_
  std::condition_variable idle_cv_;                      // Shutdown waits for busy_ == 0
  std::deque<std::shared_ptr<Run>> ready_;               // guarded by mu_; claimed, not started, oldest first
  std::map<std::string, std::shared_ptr<Run>> running_;  // guarded by mu_; claimed, not yet finished
  int concurrency_ = 0;                                  // guarded by mu_
  int busy_ = 0;                                         // guarded by mu_; == running_.size()
  bool stopping_ = false;                                // guarded by mu_
  bool started_ = false;                                 // guarded by mu_
  bool joined_ = false;                                  // guarded by mu_
  std::vector<std::thread> workers_;                     // guarded by mu_
  std::thread producer_;                                 // guarded by mu_
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_JOB_WORKER_H_
