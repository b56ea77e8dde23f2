// WakeupSender (the PostgreSQL store's off-the-enqueue-path NOTIFY sender) on its own, with a send function
// the test controls: requests made while a send is in flight are merged into one next send; Flush waits for
// what was requested before it; the destructor sends what is pending. No database (the store's use of it is
// covered by postgres_specific_test.cc and the job queue's integration tests).
#include "store/postgres/wakeup_sender.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace octop::store::postgres {
namespace {

// A send function that records each call and, while `hold` is set, blocks inside the call.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::string>> calls;  // guarded by mu
  bool hold = false;                            // guarded by mu
  int inside = 0;                               // guarded by mu: calls that have started

  WakeupSender::SendFn Fn() {
    return [this](const std::vector<std::string>& queues) {
      std::unique_lock lock(mu);
      ++inside;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
      calls.push_back(queues);
    };
  }
  void WaitInside(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return inside >= n; });
  }
  void Release() {
    {
      std::lock_guard lock(mu);
      hold = false;
    }
    cv.notify_all();
  }
};

TEST(WakeupSenderTest, RequestsMadeDuringASendGoOutTogetherInTheNextOne) {
  Recorder rec;
  rec.hold = true;
  WakeupSender sender(rec.Fn());
  sender.Request({"mail"});
  rec.WaitInside(1);  // the first send has taken {"mail"} and is blocked
  sender.Request({"reports"});
  sender.Request({"mail", "billing"});
  sender.Request({"reports"});
  rec.Release();
  sender.Flush();
  std::lock_guard lock(rec.mu);
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[0], (std::vector<std::string>{"mail"}));
  EXPECT_EQ(rec.calls[1], (std::vector<std::string>{"billing", "mail", "reports"}))
      << "one send for the three requests, each queue once, sorted";
  EXPECT_EQ(sender.requests(), 4u);
  EXPECT_EQ(sender.sends(), 2u);
}

TEST(WakeupSenderTest, FlushReturnsOnlyAfterTheSendThatCoversEarlierRequests) {
  Recorder rec;
  rec.hold = true;
  WakeupSender sender(rec.Fn());
  sender.Flush();  // nothing requested: returns at once, and no thread was started
  EXPECT_EQ(sender.sends(), 0u);
  sender.Request({"q"});
  rec.WaitInside(1);
  std::mutex flushed_mu;
  bool flushed = false;
  std::thread flusher([&] {
    sender.Flush();
    std::lock_guard lock(flushed_mu);
    flushed = true;
  });
  // The send is blocked, so the flush cannot have returned (checked before releasing it).
  {
    std::lock_guard lock(flushed_mu);
    EXPECT_FALSE(flushed);
  }
  rec.Release();
  flusher.join();
  EXPECT_TRUE(flushed);
  std::lock_guard lock(rec.mu);
  EXPECT_EQ(rec.calls.size(), 1u);
}

TEST(WakeupSenderTest, TheDestructorSendsWhatIsPending) {
  Recorder rec;
  rec.hold = true;
  auto sender = std::make_unique<WakeupSender>(rec.Fn());
  sender->Request({"first"});
  rec.WaitInside(1);
  sender->Request({"second"});  // pending behind the blocked send
  // The blocked send is released while (or just before) the destructor runs; either way the destructor may
  // return only after "second" went out.
  std::thread releaser([&] { rec.Release(); });
  sender.reset();
  releaser.join();
  std::lock_guard lock(rec.mu);
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[1], (std::vector<std::string>{"second"}));
}

TEST(WakeupSenderTest, AnEmptyRequestSendsNothing) {
  Recorder rec;
  {
    WakeupSender sender(rec.Fn());
    sender.Request({});
    sender.Flush();
    EXPECT_EQ(sender.requests(), 0u);
  }
  std::lock_guard lock(rec.mu);
  EXPECT_TRUE(rec.calls.empty());
}

}  // namespace
}  // namespace octop::store::postgres
