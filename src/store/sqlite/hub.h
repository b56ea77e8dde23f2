// Hub: SQLite's notifications, an in-process broker per database file. Every store of this process on one
// file shares its Hub, so a trigger through one store wakes listeners of all of them; other processes are not
// reached and fall back to polling (docs/store.md, "Connections, time and notifications").
//
// Thread-safety: Publish, Subscribe and For may be called from any thread; a HubListener is used by one.
#ifndef OCTOP_STORE_SQLITE_HUB_H_
#define OCTOP_STORE_SQLITE_HUB_H_

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace octop::store::sqlite {

struct Subscription {
  std::vector<std::string> channels;
  std::mutex mu;
  std::condition_variable_any arrived;
  std::deque<Notification> pending;  // guarded by mu
};

class Hub {
 public:
  void Publish(std::string_view channel, std::string_view payload) {
    std::lock_guard lock(mu_);
    for (const auto& weak : subscriptions_) {
      auto sub = weak.lock();
      if (!sub || std::find(sub->channels.begin(), sub->channels.end(), channel) == sub->channels.end())
        continue;
      {
        std::lock_guard sub_lock(sub->mu);
        sub->pending.push_back({std::string(channel), std::string(payload)});
      }
      sub->arrived.notify_all();
    }
  }

  std::shared_ptr<Subscription> Subscribe(std::vector<std::string> channels) {
    auto sub = std::make_shared<Subscription>();
    sub->channels = std::move(channels);
    std::lock_guard lock(mu_);
    std::erase_if(subscriptions_, [](const auto& weak) { return weak.expired(); });
    subscriptions_.push_back(sub);
    return sub;
  }

  // The hub of the database `key` (a canonical file path, or a per-store key for ":memory:").
  static std::shared_ptr<Hub> For(const std::string& key) {
    static std::mutex* mu = new std::mutex;  // never destroyed: stores may outlive static destruction order
    static auto* hubs = new std::map<std::string, std::weak_ptr<Hub>>;
    std::lock_guard lock(*mu);
    std::erase_if(*hubs, [](const auto& entry) { return entry.second.expired(); });
    auto& slot = (*hubs)[key];
    auto hub = slot.lock();
    if (!hub) {
      hub = std::make_shared<Hub>();
      slot = hub;
    }
    return hub;
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<Subscription>> subscriptions_;  // guarded by mu_
};

class HubListener final : public Listener {
 public:
  HubListener(std::shared_ptr<Hub> hub, std::shared_ptr<Subscription> sub)
      : hub_(std::move(hub)), sub_(std::move(sub)) {}

  Result<std::vector<Notification>> Wait(std::chrono::milliseconds timeout, std::stop_token stop) override {
    std::unique_lock lock(sub_->mu);
    sub_->arrived.wait_for(lock, stop, timeout, [&] { return !sub_->pending.empty(); });
    std::vector<Notification> out(std::make_move_iterator(sub_->pending.begin()),
                                  std::make_move_iterator(sub_->pending.end()));
    sub_->pending.clear();
    return out;
  }

 private:
  std::shared_ptr<Hub> hub_;  // keeps the hub (and so the registration) alive as long as the listener
  std::shared_ptr<Subscription> sub_;
};

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_HUB_H_
