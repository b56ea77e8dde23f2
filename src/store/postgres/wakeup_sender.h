// WakeupSender: sends the job queue's wake-ups of one PostgresStore (Store::EnqueueJobs's NOTIFY, one per
// queue) on a thread of its own, after the enqueue returned, merging the wake-ups requested while one is
// being sent into the next one.
//
// Why: a wake-up is a transaction of its own (jobs.sql NotifyJobQueues says why it cannot share the
// enqueue's), and waiting for it made every enqueue two round trips. Here the enqueuer returns after its
// insert committed; a wake-up requested after that commit is sent by a NOTIFY that starts after the request,
// so a listener that hears it sees the job. Requests that arrive while a NOTIFY is in flight wait for it and
// then go out together, one statement for all of them: many threads enqueueing through one store send far
// fewer NOTIFYs than jobs. A send that fails is not retried: polling finds the job, as it does after any lost
// notification.
//
// The thread starts with the first request (a store that never enqueues has none). The destructor sends
// what is pending, then joins. Thread-safety: Request() and Flush() may be called from any thread.
#ifndef OCTOP_STORE_POSTGRES_WAKEUP_SENDER_H_
#define OCTOP_STORE_POSTGRES_WAKEUP_SENDER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace octop::store::postgres {

class WakeupSender {
 public:
  // Sends one wake-up for each of `queues` (sorted, not empty); called on the sender's thread only.
  using SendFn = std::function<void(const std::vector<std::string>& queues)>;

  explicit WakeupSender(SendFn send);
  ~WakeupSender();
  WakeupSender(const WakeupSender&) = delete;
  WakeupSender& operator=(const WakeupSender&) = delete;

  // Asks for a wake-up of each queue; returns at once.
  void Request(const std::set<std::string>& queues);

  // Blocks until every wake-up requested before the call has been sent (or its send failed).
  void Flush();

  // How many sends (NOTIFY statements) and requests there have been (tests, benchmarks).
  std::uint64_t sends() const;
  std::uint64_t requests() const;

 private:
  void Loop(const std::stop_token& stop);

  const SendFn send_;
  mutable std::mutex mu_;
  std::condition_variable cv_;     // a request arrived, or a send finished
  std::set<std::string> pending_;  // guarded by mu_
  std::uint64_t requested_ = 0;    // guarded by mu_: requests so far
  std::uint64_t done_ = 0;         // guarded by mu_: requests covered by a finished send
  std::uint64_t sends_ = 0;        // guarded by mu_
  std::jthread thread_;            // started by the first Request(), under mu_
};

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_WAKEUP_SENDER_H_
