// The fixture of the job-queue tests: one test = a fresh "octop" namespace on one backend (SQLite always,
// PostgreSQL when OCTOP_TEST_PG_URL is set; see tests/store_conformance/store_test_env.h), any number of
// JobQueue "nodes" on it, and a direct Store to read and change rows behind their backs.
//
// Thread-safety: the fixture is used by the test thread; the recorders may be used from handler threads too.
#ifndef OCTOP_TESTS_INTEGRATION_JOB_TEST_ENV_H_
#define OCTOP_TESTS_INTEGRATION_JOB_TEST_ENV_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <octop/queue.h>
#include <octop/testing/fake_clock.h>

#include "runtime/job_queue_opener.h"
#include "runtime_test_support.h"
#include "store/job_store.h"
#include "store_test_env.h"

namespace octop::job_testing {

using runtime_testing::Eventually;
using runtime_testing::LogCapture;

// Remembers every JobContext a handler saw and lets the test wait for the n-th call.
class CallLog {
 public:
  void Add(const JobContext& ctx) {
    {
      std::lock_guard lock(mu_);
      calls_.push_back(Call{ctx.id, ctx.kind, ctx.queue, ctx.payload, ctx.attempt, ctx.max_retries});
    }
    cv_.notify_all();
  }
  bool WaitFor(std::size_t n, std::chrono::milliseconds timeout = runtime_testing::kWaitTimeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return calls_.size() >= n; });
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return calls_.size();
  }
  struct Call {
    std::string id, kind, queue, payload;
    int attempt = 0;
    int max_retries = 0;
  };
  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
};

// A gate handlers block on until the test opens it (or their stop_token fires).
class Gate {
 public:
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Returns true when opened, false when `stop` fired first.
  bool Wait(std::stop_token stop) {
    std::unique_lock lock(mu_);
    return cv_.wait(lock, stop, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool open_ = false;
};

class JobQueueTestBase : public ::testing::TestWithParam<store::testing::Backend> {
 protected:
  void SetUp() override { ns_ = store::testing::FreshNamespace(); }
  void TearDown() override {
    gate_.Open();  // a handler deaf to its stop token must not hang the shutdown of a failed test
    for (auto& q : queues_) q->Shutdown();
    queues_.clear();
  }

  const store::testing::Backend& backend() const { return GetParam(); }

  // Options for a node on this test's namespace; tests adjust them before Open().
  JobQueueOptions Options(Clock* clock) {
    JobQueueOptions o;
    o.clock = clock;
    o.logger = logs_.AsLogger();
    o.retry.base = std::chrono::milliseconds(10);
    o.retry.jitter = 0;
    return o;
  }

  // Opens this test's namespace on the backend under test, as JobQueue::Open opens "octop".
  runtime::JobStoreFactory StoreFactory() const {
    auto b = backend();
    std::string ns = ns_;
    return [b, ns](const Clock& c) {
      store::StoreOptions so;
      so.clock = &c;
      so.pool_size = 8;
      return b.open_jobs(ns, so);
    };
  }

  JobQueue& Open(JobQueueOptions options) { return Open(std::move(options), StoreFactory()); }
  JobQueue& Open(JobQueueOptions options, const runtime::JobStoreFactory& factory) {
    auto q = runtime::JobQueueOpener::Open(std::move(options), factory);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    if (!q.ok()) throw std::runtime_error("cannot open the job queue: " + q.status().ToString());
    queues_.push_back(std::move(q).value());
    return *queues_.back();
  }

  store::JobStore& Direct(const Clock& clock) {
    store::StoreOptions o;
    o.clock = &clock;
    auto opened = backend().open_jobs(ns_, o);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_TRUE((*opened)->Migrate().ok());
    directs_.push_back(std::move(opened).value());
    return *directs_.back();
  }

  // Waits until the job satisfies `pred` (re-reading it from the database).
  bool WaitForJob(JobQueue& q, const std::string& id, const std::function<bool(const JobInfo&)>& pred,
                  std::chrono::milliseconds timeout = runtime_testing::kWaitTimeout) {
    return Eventually(
        [&] {
          auto job = q.GetJob(id);
          return job.ok() && pred(*job);
        },
        timeout);
  }

  // Records the call and blocks until the test opens gate_ (or the stop token fires).
  JobHandler GatedHandler() {
    return [this](const JobContext& ctx) {
      calls_.Add(ctx);
      gate_.Wait(ctx.stop_token);
      return JobResult::Done();
    };
  }

  static JobSpec Spec(std::string kind, std::string payload = "{}") {
    JobSpec s;
    s.kind = std::move(kind);
    s.payload = std::move(payload);
    return s;
  }

  std::string ns_;
  LogCapture logs_;
  // What handlers touch lives here, not in the test body: a job may still be running when the body returns,
  // and the queues (declared last) are shut down before any of this is destroyed.
  testing::FakeClock fake_clock_;
  runtime_testing::SteppedClock stepped_clock_;
  CallLog calls_;
  CallLog calls_b_;
  Gate gate_;
  std::atomic<bool> flag_{false};
  std::atomic<int> counter_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<SteadyTime> started_;
  std::vector<std::unique_ptr<store::JobStore>> directs_;
  std::vector<std::unique_ptr<JobQueue>> queues_;  // destroyed before directs_
};

inline std::string BackendName(const ::testing::TestParamInfo<store::testing::Backend>& info) {
  return info.param.name;
}

}  // namespace octop::job_testing

#endif  // OCTOP_TESTS_INTEGRATION_JOB_TEST_ENV_H_
