// Concurrency: many threads on several Store objects ("nodes") of one namespace race for the same rows.
#include <atomic>
#include <barrier>
#include <mutex>
#include <random>
#include <thread>

#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

std::vector<std::unique_ptr<TaskStore>> OpenNodes(StoreConformance& fixture, int n,
                                                  const std::function<std::unique_ptr<TaskStore>()>& open) {
  (void)fixture;
  std::vector<std::unique_ptr<TaskStore>> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(open());
  return nodes;
}

// 16 threads over 4 Stores race TryClaimTask for one due task, round after round: exactly one wins each
// round.
TEST_P(StoreConformance, ClaimIsExclusiveUnderContention) {
  constexpr int kThreads = 16;
  constexpr int kNodes = 4;
  constexpr int kRounds = 200;
  auto nodes = OpenNodes(*this, kNodes, [&] { return OpenNode(); });
  for (const auto& n : nodes) ASSERT_NE(n, nullptr);
  AddTask("contended", DbNowPlus{});

  std::mutex mu;
  std::vector<std::string> winners;  // this round's winning tickets
  std::vector<std::string> problems;
  int rounds_checked = 0;
  int round = 0;
  // Runs on one thread once all have claimed: checks the round, releases the task for the next one.
  auto end_of_round = [&]() noexcept {
    if (winners.size() != 1) {
      problems.push_back("round " + std::to_string(round) + ": " + std::to_string(winners.size()) +
                         " winners");
    }
    for (const std::string& ticket : winners) {
      auto released = store_->TryReleaseTask({.id = "contended", .ticket = ticket, .next_run = DbNowPlus{}});
      if (!released.ok() || !*released)
        problems.push_back("round " + std::to_string(round) + ": release failed");
    }
    winners.clear();
    ++rounds_checked;
    ++round;
  };
  std::barrier sync(kThreads, end_of_round);
  std::atomic<int> errors{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        TaskStore& node = *nodes[static_cast<std::size_t>(t % kNodes)];
        for (int r = 0; r < kRounds; ++r) {
          const std::string ticket = "r" + std::to_string(r) + "-t" + std::to_string(t);
          auto claimed = node.TryClaimTask({.id = "contended", .ticket = ticket, .timeout = minutes(1)});
          if (!claimed.ok()) {
            ++errors;
            std::lock_guard lock(mu);
            problems.push_back(claimed.status().ToString());
          } else if (claimed->has_value()) {
            std::lock_guard lock(mu);
            winners.push_back(ticket);
          }
          sync.arrive_and_wait();
        }
      });
    }
  }
  EXPECT_EQ(rounds_checked, kRounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems.front();
}

// The owner's release and the janitor's sweep of the same expired run race: exactly one of them ends the run.
TEST_P(StoreConformance, ReleaseRacingTheJanitorEndsTheRunOnce) {
  auto worker = OpenNode();
  auto janitor = OpenNode();
  ASSERT_NE(worker, nullptr);
  ASSERT_NE(janitor, nullptr);
  AddTask("a", DbNowPlus{});
  int released_count = 0;
  int swept_count = 0;
  for (int round = 0; round < 100; ++round) {
    const std::string ticket = "t" + std::to_string(round);
    auto claimed = worker->TryClaimTask({.id = "a", .ticket = ticket, .timeout = seconds(1)});
    OCTOP_ASSERT_OK(claimed);
    ASSERT_TRUE(claimed->has_value()) << "round " << round;
    clock_.Advance(seconds(2));  // the run has expired
    Result<bool> released = false;
    Result<std::vector<std::string>> swept = std::vector<std::string>{};
    std::barrier start(2);
    {
      std::jthread a([&] {
        start.arrive_and_wait();
        released = worker->TryReleaseTask({.id = "a", .ticket = ticket, .next_run = DbNowPlus{}});
      });
      std::jthread b([&] {
        start.arrive_and_wait();
        swept = janitor->SweepExpiredTaskRuns({});
      });
    }
    OCTOP_ASSERT_OK(released);
    OCTOP_ASSERT_OK(swept);
    const bool was_swept = swept->size() == 1;
    EXPECT_NE(*released, was_swept) << "round " << round << ": exactly one must end the run";
    released_count += *released ? 1 : 0;
    swept_count += was_swept ? 1 : 0;
    EXPECT_EQ(Row("a").current_run_ticket, std::nullopt);
  }
  EXPECT_EQ(released_count + swept_count, 100);
}

// Concurrent upserts of one task from many nodes with different next times: the earliest wins.
TEST_P(StoreConformance, ConcurrentUpsertsKeepTheEarliestNextRun) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  auto nodes = OpenNodes(*this, 4, [&] { return OpenNode(); });
  AddTask("a", DbNowPlus{minutes(600)});
  std::atomic<int> errors{0};
  std::atomic<long long> earliest_ms{600 * 60 * 1000};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t));
        for (int i = 0; i < kPerThread; ++i) {
          const long long ms = 1000 + static_cast<long long>(rng() % 3'000'000);
          long long seen = earliest_ms.load();
          while (ms < seen && !earliest_ms.compare_exchange_weak(seen, ms)) {
          }
          const Status s = nodes[static_cast<std::size_t>(t % 4)]->UpsertTask(
              {.id = "a",
               .settings_json = std::string(kDurationSettings),
               .start_at = DbNowPlus{},
               .next_start_at = DbNowPlus{milliseconds(ms)}});
          if (!s.ok()) ++errors;
        }
      });
    }
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Show(Row("a").next_run_start_at), Show(t0() + milliseconds(earliest_ms.load())));
}

// Many workers, many tasks: every due task is claimed by exactly one of them.
TEST_P(StoreConformance, ManyTasksEachClaimedOnce) {
  constexpr int kTasks = 50;
  constexpr int kThreads = 8;
  for (int i = 0; i < kTasks; ++i) AddTask("task-" + std::to_string(i), DbNowPlus{});
  auto nodes = OpenNodes(*this, 2, [&] { return OpenNode(); });
  std::vector<std::atomic<int>> wins(kTasks);
  std::atomic<int> errors{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kTasks; ++i) {
          auto claimed = nodes[static_cast<std::size_t>(t % 2)]->TryClaimTask(
              {.id = "task-" + std::to_string(i), .ticket = "w" + std::to_string(t), .timeout = minutes(1)});
          if (!claimed.ok()) {
            ++errors;
          } else if (claimed->has_value()) {
            ++wins[static_cast<std::size_t>(i)];
          }
        }
      });
    }
  }
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(wins[static_cast<std::size_t>(i)].load(), 1) << "task-" << i;
}

}  // namespace
}  // namespace octop::store::testing
