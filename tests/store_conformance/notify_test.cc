// Notifications: TriggerTask wakes listeners of kTasksChannel on other Stores of the same namespace.
#include <thread>

#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Waits (with a deadline) until a notification arrives; the first batch that has any.
std::vector<Notification> WaitForAny(Listener& listener, std::chrono::milliseconds deadline = seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    auto got = listener.Wait(milliseconds(200), {});
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return {};
    if (!got->empty()) return *got;
  }
  return {};
}

TEST_P(StoreConformance, TriggerNotifiesAListenerOnAnotherStore) {
  auto listener = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(listener);
  auto other = OpenNode();
  ASSERT_NE(other, nullptr);
  AddTask("wake-me", DbNowPlus{std::chrono::hours(1)});
  const auto start = std::chrono::steady_clock::now();
  OCTOP_ASSERT_OK(other->TriggerTask({.id = "wake-me"}));
  const auto got = WaitForAny(**listener);
  const auto latency = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].channel, kTasksChannel);
  EXPECT_EQ(got[0].payload, "wake-me");
  EXPECT_LT(latency, seconds(5));
}

TEST_P(StoreConformance, AListenerWakesWhileBlockedInWait) {
  auto listener = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(listener);
  AddTask("a", DbNowPlus{});
  Result<std::vector<Notification>> got = std::vector<Notification>{};
  std::jthread waiter([&] { got = (*listener)->Wait(seconds(30), {}); });
  auto other = OpenNode();
  ASSERT_NE(other, nullptr);
  OCTOP_ASSERT_OK(other->TriggerTask({.id = "a"}));
  waiter.join();  // returns long before the 30 s timeout because of the notification
  OCTOP_ASSERT_OK(got);
  ASSERT_FALSE(got->empty());
  EXPECT_EQ(got->front().payload, "a");
}

TEST_P(StoreConformance, FailedTriggersDoNotNotify) {
  auto listener = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(listener);
  AddTask("running", DbNowPlus{});
  AddTask("ok", DbNowPlus{});
  ASSERT_TRUE(Claim("running", "t").has_value());
  EXPECT_EQ(store_->TriggerTask({.id = "missing"}).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->TriggerTask({.id = "running"}).code(), StatusCode::kConflict);
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "ok"}));
  const auto got = WaitForAny(**listener);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].payload, "ok") << "the failed triggers sent nothing before it";
}

TEST_P(StoreConformance, ListenersOfAnotherNamespaceAreNotWoken) {
  StoreOptions options;
  options.clock = &clock_;
  auto elsewhere = OpenNode(options, ns_ + "_other");
  ASSERT_NE(elsewhere, nullptr);
  OCTOP_ASSERT_OK(elsewhere->Migrate());
  OCTOP_ASSERT_OK(elsewhere->UpsertTask({.id = "theirs",
                                         .settings_json = std::string(kDurationSettings),
                                         .start_at = DbNowPlus{},
                                         .next_start_at = DbNowPlus{}}));
  auto listener = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(listener);
  AddTask("ours", DbNowPlus{});
  OCTOP_ASSERT_OK(elsewhere->TriggerTask({.id = "theirs"}));
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "ours"}));
  const auto got = WaitForAny(**listener);
  ASSERT_FALSE(got.empty());
  for (const Notification& n : got) EXPECT_EQ(n.payload, "ours");
}

TEST_P(StoreConformance, ListenerWaitEndsOnTimeoutOrStopWithNothing) {
  auto listener = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(listener);
  auto got = (*listener)->Wait(milliseconds(20), {});
  OCTOP_ASSERT_OK(got);
  EXPECT_TRUE(got->empty());
  std::stop_source stop;
  stop.request_stop();
  const auto start = std::chrono::steady_clock::now();
  got = (*listener)->Wait(seconds(30), stop.get_token());
  OCTOP_ASSERT_OK(got);
  EXPECT_TRUE(got->empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
}

TEST_P(StoreConformance, ListenerOnlyGetsItsChannels) {
  auto jobs_only = store_->Listen({std::string(kJobsChannel)});
  OCTOP_ASSERT_OK(jobs_only);
  auto tasks = store_->Listen({std::string(kTasksChannel)});
  OCTOP_ASSERT_OK(tasks);
  AddTask("a", DbNowPlus{});
  OCTOP_ASSERT_OK(store_->TriggerTask({.id = "a"}));
  ASSERT_FALSE(WaitForAny(**tasks).empty());
  auto none = (*jobs_only)->Wait(milliseconds(20), {});
  OCTOP_ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace octop::store::testing
