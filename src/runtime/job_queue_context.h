// JobQueueContext: what every part of one JobQueue shares -- the RuntimeContext (clock, log sink), the store,
// metrics, options, the handlers registered per kind, and the runtime settings read from the octop_config
// table. Owned by
// JobQueue::Impl, which outlives every producer, worker, completer and maintenance thread that points to it.
//
// Thread-safety: the immutable parts are set before any thread starts; the handler table is guarded by its
// own mutex and the settings are atomics, so every member may be used from any thread.
#ifndef OCTOP_RUNTIME_JOB_QUEUE_CONTEXT_H_
#define OCTOP_RUNTIME_JOB_QUEUE_CONTEXT_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>
#include <octop/queue.h>

#include "runtime/database_clock.h"
#include "runtime/job_metrics.h"
#include "runtime/runtime_context.h"
#include "store/job_store.h"

namespace octop::runtime {

// The handlers of one node, per kind. Entries are immutable once registered (replacing one swaps the
// pointer), so a worker keeps using the entry it looked up while a new one is registered.
class JobHandlerRegistry {
 public:
  struct Entry {
    std::string kind;
    JobHandler handler;
    JobHandlerOptions options;
  };

  void Set(std::string kind, JobHandler handler, JobHandlerOptions options) {
    auto entry = std::make_shared<const Entry>(Entry{kind, std::move(handler), options});
    std::lock_guard lock(mu_);
    entries_[std::move(kind)] = std::move(entry);
    version_.fetch_add(1);
  }
  std::shared_ptr<const Entry> Find(std::string_view kind) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(kind);
    return it == entries_.end() ? nullptr : it->second;
  }
  std::vector<std::string> Kinds() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> kinds;
    for (const auto& [kind, entry] : entries_) kinds.push_back(kind);
    return kinds;
  }
  // The longest timeout of any handler (`fallback` for those without their own): the expiry a claim of
  // several kinds at once must allow.
  std::chrono::milliseconds MaxTimeout(std::chrono::milliseconds fallback) const {
    std::lock_guard lock(mu_);
    std::chrono::milliseconds longest{0};
    for (const auto& [kind, entry] : entries_)
      longest = std::max(longest, entry->options.timeout.value_or(fallback));
    return longest.count() > 0 ? longest : fallback;
  }
  // Changes whenever a handler is registered, so callers can cache Kinds().
  std::uint64_t version() const { return version_.load(); }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> entries_;  // guarded by mu_
  std::atomic<std::uint64_t> version_{0};
};

struct JobQueueContext : RuntimeContext {
  JobQueueOptions options;  // immutable after Open()
  std::string worker_id;    // stored with each claim: "<hostname>-<pid>"
  store::JobStore* store = nullptr;
  JobMetrics* metrics = nullptr;
  JobHandlerRegistry handlers;

  // From the octop_config table, refreshed by the maintenance thread.
  std::atomic<std::int64_t> poll_interval_ms{1000};
  std::atomic<std::int64_t> default_timeout_ms{300000};
  // The database's clock as this node sees it, measured by the maintenance thread. Set in Open(), with clock.
  std::optional<DatabaseClock> db_clock;

  std::chrono::milliseconds PollInterval() const {
    return std::chrono::milliseconds(poll_interval_ms.load());
  }
  std::chrono::milliseconds DefaultTimeout() const {
    return std::chrono::milliseconds(default_timeout_ms.load());
  }
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_JOB_QUEUE_CONTEXT_H_
