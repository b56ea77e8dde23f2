// WakeupSender: see wakeup_sender.h.
#include "store/postgres/wakeup_sender.h"

#include <utility>

namespace octop::store::postgres {

WakeupSender::WakeupSender(SendFn send) : send_(std::move(send)) {}

WakeupSender::~WakeupSender() {
  // The loop sends what is pending before it looks at the stop request. Requesting it under mu_ means the
  // loop either sees it when it next checks, or is waiting and gets the notify.
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    thread_.request_stop();
  }
  cv_.notify_all();
  thread_.join();
}

void WakeupSender::Request(const std::set<std::string>& queues) {
  if (queues.empty()) return;
  {
    std::lock_guard lock(mu_);
    pending_.insert(queues.begin(), queues.end());
    ++requested_;
    if (!thread_.joinable()) thread_ = std::jthread([this](const std::stop_token& stop) { Loop(stop); });
  }
  cv_.notify_all();
}

void WakeupSender::Flush() {
  std::unique_lock lock(mu_);
  const std::uint64_t target = requested_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

std::uint64_t WakeupSender::sends() const {
  std::lock_guard lock(mu_);
  return sends_;
}

std::uint64_t WakeupSender::requests() const {
  std::lock_guard lock(mu_);
  return requested_;
}

void WakeupSender::Loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  for (;;) {
    // Not cv_.wait(lock, stop, ...): a stop must not skip what is pending.
    cv_.wait(lock, [&] { return !pending_.empty() || stop.stop_requested(); });
    if (pending_.empty()) return;  // stopped, nothing left
    std::vector<std::string> queues(pending_.begin(), pending_.end());
    pending_.clear();
    const std::uint64_t covered = requested_;
    lock.unlock();
    send_(queues);
    lock.lock();
    ++sends_;
    done_ = covered;
    cv_.notify_all();
  }
}

}  // namespace octop::store::postgres
