// JobQueueWorker: the workers of one queue on this node -- a producer thread and a fixed pool of
// `concurrency` worker threads.
//
// The producer claims due jobs in one ClaimJobs statement per batch, never more than the free worker slots
// (so a claimed job starts at once and its expiry in the database is honest), and hands them to the pool. It
// claims when woken (an enqueue in this process, a database notification, a slot freed while more jobs may be
// waiting), when the next job of the queue becomes due (NextJobDueAt, translated to this node's clock), and
// at the poll interval (the fallback for missed notifications). It also supervises the running jobs: at a
// job's timeout its stop_token fires. Workers run the handler, turn its JobResult (or exception) into a
// completion with the backoff of the retry policy, and pass it to the JobCompleter.
//
// Waits read the context's clock (FakeClock in tests), except the shutdown grace, which is real time.
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
  // Stops claiming; running handlers get `grace` (real time) to finish, then their stop_tokens fire; waits
  // for all of them and joins every thread. Their completions are handed to the completer. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Run {
    store::JobRow row;
    std::stop_source stop;
    std::chrono::milliseconds timeout{0};
    SteadyTime deadline;
    bool timed_out = false;    // guarded by mu_
    bool cancelled = false;    // guarded by mu_
    bool interrupted = false;  // guarded by mu_: stopped by Shutdown after the grace
  };

  void ProducerLoop(std::stop_token stop);
  void WorkerLoop();
  // One claim; returns whether to claim again as soon as a slot is free (it filled every free slot, or a job
  // became due while it ran).
  bool Claim(int free, SteadyTime now);
  void Execute(const std::shared_ptr<Run>& run);
  PendingCompletion Complete(const Run& run, JobResult result, bool timed_out, bool cancelled,
                             bool interrupted);
  std::chrono::milliseconds Backoff(int attempt);

  JobQueueContext& context_;
  JobCompleter& completer_;
  const std::string queue_;

  WakeSignal wake_;                // the producer's
  std::atomic<bool> dirty_{true};  // a claim may find something: set by Notify and by a full claim
  std::atomic<bool> paused_{false};
  std::stop_source producer_stop_;

  // Producer thread only.
  std::vector<std::string> kinds_;
  std::uint64_t kinds_version_ = ~std::uint64_t{0};
  std::optional<SteadyTime> next_due_;
  SteadyTime last_claim_{};
  int early_polls_ = 0;
  bool waiting_for_slot_ = false;  // guarded by mu_: the producer found no free slot and waits for one

  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // guarded by rng_mu_

  mutable std::mutex mu_;
  std::condition_variable work_cv_;                      // workers wait for ready_ or stopping_
  std::condition_variable idle_cv_;                      // Shutdown waits for busy_ == 0
  std::deque<std::shared_ptr<Run>> ready_;               // guarded by mu_
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
