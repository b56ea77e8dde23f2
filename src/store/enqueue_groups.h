// EnqueueGroups: concurrent enqueues of one store written together (group commit on the client's side). While
// one batch is being written, the batches of the callers that arrive meanwhile wait; the first of them then
// writes them all as one batch: one statement and one commit. With 8 threads enqueueing one job at a time
// that is one WAL flush for several jobs instead of one each (docs/store.md §8.3, EnqueueJobs; measured in
// docs/performance.md, "Statements per job"). A caller alone is written at once. Each caller gets its own
// results, in its own order; when a group fails, each batch of it is written again on its own, so a batch the
// database refuses fails its own caller only.
//
// Thread-safety: Enqueue may be called from any number of threads; the writer runs on one of them at a time.
#ifndef OCTOP_STORE_ENQUEUE_GROUPS_H_
#define OCTOP_STORE_ENQUEUE_GROUPS_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <octop/job.h>
#include <octop/status.h>

namespace octop::store {

class EnqueueGroups {
 public:
  using Writer = std::function<Result<std::vector<EnqueueResult>>(const std::vector<JobSpec>&)>;
  // At most this many items join one group (a batch larger than that is written alone).
  static constexpr std::size_t kMaxGroupItems = 1000;

  explicit EnqueueGroups(Writer writer) : writer_(std::move(writer)) {}

  // How many callers wait for the write in flight (for tests).
  std::size_t waiting() {
    std::lock_guard lock(mu_);
    return waiting_.size();
  }

  Result<std::vector<EnqueueResult>> Enqueue(const std::vector<JobSpec>& jobs) {
    Waiter me{&jobs};
    std::unique_lock lock(mu_);
    waiting_.push_back(&me);
    if (writing_) {
      // Woken once: with this caller's result, or to write the next group (the writer hands over to the first
      // caller still waiting). Not one cv for all: each group's end would wake every waiting caller.
      me.cv.wait(lock, [&] { return me.result.has_value() || me.lead; });
      if (me.result) return std::move(*me.result);
    }
    writing_ = true;
    // This caller is the first of waiting_, so its own batch is in the group.
    std::vector<Waiter*> group;
    std::size_t items = 0;
    while (!waiting_.empty() && (group.empty() || items + waiting_.front()->jobs->size() <= kMaxGroupItems)) {
      items += waiting_.front()->jobs->size();
      group.push_back(waiting_.front());
      waiting_.pop_front();
    }
    lock.unlock();
    std::vector<Result<std::vector<EnqueueResult>>> results = Write(group);
    lock.lock();
    // Notified under mu_: a caller returns (and its Waiter goes) only after it has the lock again.
    for (std::size_t i = 0; i < group.size(); ++i) {
      group[i]->result = std::move(results[i]);
      if (group[i] != &me) group[i]->cv.notify_one();
    }
    if (waiting_.empty()) {
      writing_ = false;
    } else {
      waiting_.front()->lead = true;
      waiting_.front()->cv.notify_one();
    }
    return std::move(*me.result);
  }

 private:
  struct Waiter {
    const std::vector<JobSpec>* jobs;
    std::condition_variable cv;                                // under mu_
    bool lead = false;                                         // under mu_: it writes the next group
    std::optional<Result<std::vector<EnqueueResult>>> result;  // set under mu_
  };

  std::vector<Result<std::vector<EnqueueResult>>> Write(const std::vector<Waiter*>& group) {
    std::vector<Result<std::vector<EnqueueResult>>> results;
    if (group.size() > 1) {
      std::vector<JobSpec> all;
      for (const Waiter* w : group) all.insert(all.end(), w->jobs->begin(), w->jobs->end());
      Result<std::vector<EnqueueResult>> written = writer_(all);
      if (written.ok() && written->size() == all.size()) {
        auto next = written->begin();
        for (const Waiter* w : group) {
          const auto end = next + static_cast<std::ptrdiff_t>(w->jobs->size());
          results.emplace_back(
              std::vector<EnqueueResult>(std::make_move_iterator(next), std::make_move_iterator(end)));
          next = end;
        }
        return results;
      }
    }
    for (const Waiter* w : group) results.push_back(writer_(*w->jobs));
    return results;
  }

  const Writer writer_;
  std::mutex mu_;
  std::deque<Waiter*> waiting_;  // not yet in a group, in arrival order
  bool writing_ = false;         // a group is being written; its writer hands over to waiting_.front()
};

}  // namespace octop::store

#endif  // OCTOP_STORE_ENQUEUE_GROUPS_H_
