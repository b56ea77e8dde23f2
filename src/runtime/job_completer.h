// JobCompleter: writes the ends of job attempts to the store in batches -- one CompleteJobs transaction for
// everything that finished while the previous batch was being written, or within completion_flush_interval of
// the first waiting item, up to completion_batch items. This is what lets a queue run far more jobs per
// second than it can commit transactions.
//
// Batching waits on the real clock (it is about I/O, not the schedule), so FakeClock tests see completions
// written without advancing fake time. A failed write is retried (after kRetryAfterFailure) with the same
// items; completions that are still unwritten when Join() gives up are lost to the rescuer, which re-runs
// those jobs after their expiry (at-least-once).
//
// Ownership: owned by JobQueue::Impl; borrows the context. Thread-safety: Add() from any thread; Start/Join
// from the owner.
#ifndef OCTOP_RUNTIME_JOB_COMPLETER_H_
#define OCTOP_RUNTIME_JOB_COMPLETER_H_

#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "runtime/job_queue_context.h"

namespace octop::runtime {

struct PendingCompletion {
  store::JobCompletion completion;
  std::string queue;   // for metrics
  std::string kind;    // for metrics
  std::string result;  // metrics label: success | retry | failed | cancelled
};

class JobCompleter {
 public:
  // `on_retry(queue)` runs after a batch with retried attempts or released (prefetched, never started) jobs
  // is written: their queue has a new due time.
  JobCompleter(JobQueueContext& context, std::function<void(const std::string& queue)> on_retry)
      : context_(context), on_retry_(std::move(on_retry)) {}
  ~JobCompleter() { Join(); }
  JobCompleter(const JobCompleter&) = delete;
  JobCompleter& operator=(const JobCompleter&) = delete;

  void Start();
  void Add(PendingCompletion item);
  // Writes what is waiting (a few tries if the database fails) and joins the thread. Call after every worker
  // has stopped adding.
  void Join();

  // How many completions have been written (applied or fenced).
  std::size_t written() const;

 private:
  void Loop(std::stop_token stop);
  bool Write(std::vector<PendingCompletion>& batch);

  JobQueueContext& context_;
  const std::function<void(const std::string& queue)> on_retry_;
  WakeSignal wake_;
  mutable std::mutex mu_;
  std::vector<PendingCompletion> items_;  // guarded by mu_
  std::size_t written_ = 0;               // guarded by mu_
  std::jthread thread_;
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_JOB_COMPLETER_H_
