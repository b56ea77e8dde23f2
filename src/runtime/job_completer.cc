#include "runtime/job_completer.h"

#include <algorithm>
#include <utility>

namespace octop::runtime {

namespace {

constexpr std::chrono::hours kIdleWait{1};
constexpr int kFinalWriteAttempts = 3;

}  // namespace

void JobCompleter::Start() {
  if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { Loop(std::move(stop)); });
}

void JobCompleter::Add(PendingCompletion item) {
  bool notify = false;
  {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(item));
    // The first item starts the flush timer; a full batch cuts it short.
    notify = items_.size() == 1 || items_.size() >= context_.options.completion_batch;
  }
  if (notify) wake_.Notify();
}

std::size_t JobCompleter::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

bool JobCompleter::Write(std::vector<PendingCompletion>& batch) {
  std::vector<store::JobCompletion> completions;
  completions.reserve(batch.size());
  for (const PendingCompletion& item : batch) completions.push_back(item.completion);
  Result<std::vector<bool>> applied = context_.store->CompleteJobs(completions);
  if (!applied.ok()) {
    context_.Log(LogLevel::kWarn, "Failed to record " + std::to_string(batch.size()) + " job completions, " +
                                      applied.status().ToString());
    return false;
  }
  std::vector<std::string> retried;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const bool ok = i < applied->size() && (*applied)[i];
    if (ok &&
        (batch[i].completion.outcome == store::JobOutcome::kRetry ||
         batch[i].completion.outcome == store::JobOutcome::kFail ||
         batch[i].completion.outcome == store::JobOutcome::kRelease) &&
        std::find(retried.begin(), retried.end(), batch[i].queue) == retried.end()) {
      retried.push_back(batch[i].queue);
    }
    context_.metrics->Completed(batch[i].queue, batch[i].kind, ok ? batch[i].result : "fenced");
    if (!ok) {
      context_.Log(LogLevel::kInfo, "Job " + batch[i].completion.id +
                                        " was no longer owned by this node when its attempt ended (rescued, "
                                        "cancelled or re-claimed); its result was discarded");
    }
  }
  {
    std::lock_guard lock(mu_);
    written_ += batch.size();
  }
  if (on_retry_) {
    for (const std::string& queue : retried) on_retry_(queue);
  }
  return true;
}

void JobCompleter::Loop(std::stop_token stop) {
  Clock& real = Clock::Real();
  const std::size_t max_batch = std::max<std::size_t>(1, context_.options.completion_batch);
  std::vector<PendingCompletion> batch;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (items_.empty()) {
        lock.unlock();
        if (stop.stop_requested()) return;
        real.WaitFor(kIdleWait, stop, &wake_);
        continue;
      }
      if (items_.size() < max_batch && context_.options.completion_flush_interval.count() > 0 &&
          !stop.stop_requested()) {
        lock.unlock();
        // Gather for a moment: a full batch (Add notifies) or stop ends the wait early.
        real.WaitFor(context_.options.completion_flush_interval, stop, &wake_);
        lock.lock();
      }
      const std::size_t n = std::min(items_.size(), max_batch);
      batch.assign(std::make_move_iterator(items_.begin()),
                   std::make_move_iterator(items_.begin() + static_cast<std::ptrdiff_t>(n)));
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    int attempts = 0;
    while (!Write(batch)) {
      ++attempts;
      if (stop.stop_requested() && attempts >= kFinalWriteAttempts) {
        context_.Log(LogLevel::kError,
                     "Giving up on " + std::to_string(batch.size()) +
                         " job completions at shutdown; the rescuer will re-run those jobs");
        break;
      }
      // Retry on real time; a stop only shortens the wait so shutdown keeps trying a few times.
      real.WaitFor(kRetryAfterFailure, stop);
    }
    batch.clear();
  }
}

void JobCompleter::Join() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

}  // namespace octop::runtime
