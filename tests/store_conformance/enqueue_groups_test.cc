// EnqueueGroups (store/enqueue_groups.h) with a writer of its own: which batches are written together, what
// each caller gets back, and what happens when a group fails. The first write is held until the other callers
// are waiting, so the grouping is deterministic.
#include "store/enqueue_groups.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace octop::store {
namespace {

using namespace std::chrono_literals;

// Writes a batch by answering each item with "<kind>#<n>" (n counts items over every write); refuses any
// batch holding a job of kind "bad". The first write waits until `release` is called.
class FakeWriter {
 public:
  Result<std::vector<EnqueueResult>> Write(const std::vector<JobSpec>& jobs) {
    std::unique_lock lock(mu_);
    batches_.push_back(jobs.size());
    cv_.notify_all();
    if (batches_.size() == 1) cv_.wait(lock, [&] { return released_; });
    for (const JobSpec& job : jobs) {
      if (job.kind == "bad") return InvalidArgumentError("the database refused a job");
    }
    std::vector<EnqueueResult> out;
    for (const JobSpec& job : jobs) out.push_back({job.kind + "#" + std::to_string(++items_), false});
    return out;
  }
  void WaitForFirstWrite() {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, 10s, [&] { return !batches_.empty(); }));
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<std::size_t> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::size_t> batches_;
  int items_ = 0;
};

std::vector<JobSpec> Jobs(std::initializer_list<const char*> kinds) {
  std::vector<JobSpec> jobs;
  for (const char* kind : kinds) jobs.push_back({.kind = kind});
  return jobs;
}

using Results = std::vector<Result<std::vector<EnqueueResult>>>;

// Enqueues batches[0], and while its write is held the other batches from threads of their own; once
// `expected_waiting` callers wait, releases the write. Returns each caller's result.
Results Concurrently(EnqueueGroups& groups, FakeWriter& writer,
                     const std::vector<std::vector<JobSpec>>& batches, std::size_t expected_waiting) {
  std::vector<std::optional<Result<std::vector<EnqueueResult>>>> slots(batches.size());
  std::vector<std::thread> threads;
  threads.emplace_back([&] { slots[0] = groups.Enqueue(batches[0]); });
  writer.WaitForFirstWrite();
  for (std::size_t i = 1; i < batches.size(); ++i) {
    threads.emplace_back([&, i] { slots[i] = groups.Enqueue(batches[i]); });
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (groups.waiting() < expected_waiting && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(groups.waiting(), expected_waiting);
  writer.Release();
  for (std::thread& t : threads) t.join();
  Results results;
  for (auto& slot : slots) results.push_back(std::move(*slot));
  return results;
}

TEST(EnqueueGroups, CallersArrivingDuringAWriteAreWrittenTogetherAndGetTheirOwnResults) {
  FakeWriter writer;
  EnqueueGroups groups([&](const std::vector<JobSpec>& jobs) { return writer.Write(jobs); });
  Results results = Concurrently(groups, writer,
                                 {Jobs({"first"}), Jobs({"a", "a"}), Jobs({"b"}), Jobs({"c", "c", "c"})}, 3);
  EXPECT_EQ(writer.batches(), (std::vector<std::size_t>{1, 6})) << "the three waiting batches in one write";
  ASSERT_TRUE(results[0].ok());
  EXPECT_EQ(results[0]->at(0).id, "first#1");
  for (std::size_t i = 1; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
  }
  // Each caller gets as many results as it gave jobs, its own kinds, in its order.
  ASSERT_EQ(results[1]->size(), 2u);
  ASSERT_EQ(results[2]->size(), 1u);
  ASSERT_EQ(results[3]->size(), 3u);
  // The order of the waiting batches within the group is their arrival order, which the threads do not fix;
  // what is fixed is that each caller's items are consecutive and carry its kind.
  for (const auto& [i, kind] :
       std::vector<std::pair<std::size_t, std::string>>{{1, "a"}, {2, "b"}, {3, "c"}}) {
    for (const EnqueueResult& r : *results[i]) EXPECT_EQ(r.id.substr(0, kind.size() + 1), kind + "#");
  }
}

TEST(EnqueueGroups, AFailedGroupIsWrittenAgainBatchByBatchSoOnlyTheBadBatchFails) {
  FakeWriter writer;
  EnqueueGroups groups([&](const std::vector<JobSpec>& jobs) { return writer.Write(jobs); });
  Results results =
      Concurrently(groups, writer, {Jobs({"first"}), Jobs({"a"}), Jobs({"bad", "b"}), Jobs({"c"})}, 3);
  // The group of three is refused, then each of its batches is written alone.
  std::vector<std::size_t> batches = writer.batches();
  ASSERT_EQ(batches.size(), 5u);
  EXPECT_EQ(batches[0], 1u);
  EXPECT_EQ(batches[1], 4u) << "the three waiting batches together";
  std::sort(batches.begin() + 2, batches.end());  // then each alone, in their (unfixed) arrival order
  EXPECT_EQ(batches, (std::vector<std::size_t>{1, 4, 1, 1, 2}));
  EXPECT_TRUE(results[0].ok());
  EXPECT_TRUE(results[1].ok());
  EXPECT_FALSE(results[2].ok());
  EXPECT_EQ(results[2].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[3].ok());
  EXPECT_EQ(results[3]->at(0).id.substr(0, 2), "c#");
}

TEST(EnqueueGroups, AGroupStopsAtItsItemLimitAndTheRestIsWrittenNext) {
  FakeWriter writer;
  EnqueueGroups groups([&](const std::vector<JobSpec>& jobs) { return writer.Write(jobs); });
  std::vector<JobSpec> big(EnqueueGroups::kMaxGroupItems - 1, JobSpec{.kind = "big"});
  Results results = Concurrently(groups, writer, {Jobs({"first"}), big, Jobs({"x", "y"})}, 2);
  // The big batch and the two after it do not fit in one group: two writes after the first.
  const std::vector<std::size_t> batches = writer.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1] + batches[2], big.size() + 2);
  for (const auto& r : results) EXPECT_TRUE(r.ok());
}

TEST(EnqueueGroups, ACallerAloneIsWrittenAtOnce) {
  FakeWriter writer;
  writer.Release();
  EnqueueGroups groups([&](const std::vector<JobSpec>& jobs) { return writer.Write(jobs); });
  auto one = groups.Enqueue(Jobs({"solo"}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->at(0).id, "solo#1");
  auto two = groups.Enqueue(Jobs({"solo", "solo"}));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ(writer.batches(), (std::vector<std::size_t>{1, 2}));
}

}  // namespace
}  // namespace octop::store
