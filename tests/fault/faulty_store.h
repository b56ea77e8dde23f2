// FaultyTaskStore and FaultyJobStore: store decorators (TaskStoreWrapper, JobStoreWrapper) that inject
// database faults at the store seam, for the fault-injection tests (docs/reliability.md).
//
// A FaultPlan, shared by the test and every faulty store built with it, holds one rule per operation:
//   kBeforeStatement  the call fails with kUnavailable without reaching the database -- a connection that
//                     dropped before the statement was sent; nothing is written.
//   kAmbiguousCommit  the call is performed on the inner store and then fails with kUnavailable -- the
//                     connection dropped after COMMIT was sent, so the caller cannot know the write happened.
// A rule fails the next `count` calls of its operation (kForever: until cleared) and is then gone. Every call
// and every injected fault is counted per operation, so a test can assert that a fault really hit.
//
// Ownership: a faulty store owns its inner store; the plan is shared (std::shared_ptr) between the test and
// the stores. Listeners and transactions are the inner store's own objects.
//
// Thread-safety: FaultPlan and the faulty stores may be used from any number of threads at once (the plan is
// guarded by a mutex; the inner store is thread-safe by the store contract).
#ifndef OCTOP_TESTS_FAULT_FAULTY_STORE_H_
#define OCTOP_TESTS_FAULT_FAULTY_STORE_H_

#include <array>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <octop/status.h>

#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::fault_testing {

// One value per virtual of TaskStore and JobStore (kCount last).
enum class StoreOp {
  kMigrate,
  kSchemaVersion,
  kDatabaseNow,
  kCheckWritable,
  kCountBackstageSessions,
  kUpsertTask,
  kPollTasks,
  kTryClaimTask,
  kCheckTaskTicket,
  kTryReleaseTask,
  kTriggerTask,
  kCancelTask,
  kCapTaskNextRun,
  kSweepExpiredTaskRuns,
  kListTasks,
  kListen,
  kEnqueueJobs,
  kWithTransaction,
  kClaimJobs,
  kCompleteJobs,
  kRescueExpiredJobs,
  kRenewJobLeases,
  kRetryJob,
  kCancelJob,
  kCancelRequestsFor,
  kGetJob,
  kListJobs,
  kListFailedJobs,
  kSummarizeJobs,
  kComputeJobStats,
  kNextJobDueAt,
  kSetQueuePaused,
  kListQueues,
  kDeleteFinishedJobs,
  kReconcileJobSets,
  kGetConfig,
  kSetConfig,
  kCount,
};
std::string_view StoreOpName(StoreOp op);

enum class FaultKind { kBeforeStatement, kAmbiguousCommit };

class FaultPlan {
 public:
  static constexpr long kForever = std::numeric_limits<long>::max();

  // Fails the next `count` calls of `op` (replacing an earlier rule for `op`).
  void FailNext(StoreOp op, long count, FaultKind kind = FaultKind::kBeforeStatement);
  void FailForever(StoreOp op, FaultKind kind = FaultKind::kBeforeStatement) { FailNext(op, kForever, kind); }
  void Clear(StoreOp op);
  void ClearAll();

  long calls(StoreOp op) const;     // calls that reached the FaultyStore (faulted or not)
  long injected(StoreOp op) const;  // calls that were failed
  long pending(StoreOp op) const;   // faults the current rule still has to inject

  // Called by a faulty store once per call: the fault to inject into this call, if any.
  std::optional<FaultKind> Take(StoreOp op);

 private:
  struct Rule {
    long remaining = 0;
    FaultKind kind = FaultKind::kBeforeStatement;
  };
  static std::size_t Index(StoreOp op) { return static_cast<std::size_t>(op); }
  mutable std::mutex mu_;
  std::array<Rule, static_cast<std::size_t>(StoreOp::kCount)> rules_{};
  std::array<long, static_cast<std::size_t>(StoreOp::kCount)> calls_{};
  std::array<long, static_cast<std::size_t>(StoreOp::kCount)> injected_{};
};

// Runs `call` on the inner store unless the plan fails it first; an ambiguous fault runs it and then fails.
template <typename Call>
auto Faulted(FaultPlan& plan, StoreOp op, Call&& call) -> decltype(call()) {
  const std::optional<FaultKind> fault = plan.Take(op);
  if (fault == FaultKind::kBeforeStatement) {
    return UnavailableError("injected fault: connection lost before " + std::string(StoreOpName(op)));
  }
  auto result = call();
  if (fault == FaultKind::kAmbiguousCommit) {
    return UnavailableError("injected fault: connection lost after COMMIT of " +
                            std::string(StoreOpName(op)));
  }
  return result;
}

class FaultyTaskStore final : public store::TaskStoreWrapper {
 public:
  FaultyTaskStore(std::unique_ptr<store::TaskStore> inner, std::shared_ptr<FaultPlan> plan)
      : TaskStoreWrapper(std::move(inner)), plan_(std::move(plan)) {}

  Status Migrate() override;
  Result<int> SchemaVersion() override;
  Status CheckWritable() override;
  Result<WallTime> DatabaseNow() override;
  Result<std::unique_ptr<store::Listener>> Listen(std::vector<std::string> channels) override;
  Result<int> CountBackstageSessions() override;
  Status UpsertTask(const store::UpsertTaskParams& params) override;
  Result<store::PollTasksResult> PollTasks(const store::PollTasksParams& params) override;
  Result<std::optional<store::ClaimedRun>> TryClaimTask(const store::ClaimTaskParams& params) override;
  Result<bool> CheckTaskTicket(const store::CheckTaskTicketParams& params) override;
  Result<bool> TryReleaseTask(const store::ReleaseTaskParams& params) override;
  Status TriggerTask(const store::TriggerTaskParams& params) override;
  Status CancelTask(const store::CancelTaskParams& params) override;
  Result<bool> CapTaskNextRun(const store::CapTaskNextRunParams& params) override;
  Result<std::vector<std::string>> SweepExpiredTaskRuns(
      const store::SweepExpiredTaskRunsParams& params) override;
  Result<std::vector<store::TaskRow>> ListTasks(const store::ListTasksParams& params) override;

 private:
  std::shared_ptr<FaultPlan> plan_;
};

class FaultyJobStore final : public store::JobStoreWrapper {
 public:
  FaultyJobStore(std::unique_ptr<store::JobStore> inner, std::shared_ptr<FaultPlan> plan)
      : JobStoreWrapper(std::move(inner)), plan_(std::move(plan)) {}

  Status Migrate() override;
  Result<int> SchemaVersion() override;
  Status CheckWritable() override;
  Result<WallTime> DatabaseNow() override;
  Result<std::unique_ptr<store::Listener>> Listen(std::vector<std::string> channels) override;
  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override;
  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override;
  Result<std::vector<JobInfo>> ClaimJobs(const store::ClaimJobsParams& params) override;
  Result<std::vector<bool>> CompleteJobs(const std::vector<store::JobCompletion>& completions) override;
  Result<std::vector<store::RescuedJob>> RescueExpiredJobs(
      const store::RescueExpiredJobsParams& params) override;
  Result<long> RenewJobLeases(const store::RenewJobLeasesParams& params) override;
  Status RetryJob(const store::RetryJobParams& params) override;
  Result<store::CancelJobResult> CancelJob(const store::CancelJobParams& params) override;
  Result<std::vector<std::string>> CancelRequestsFor(const std::vector<std::string>& tokens) override;
  Result<JobInfo> GetJob(std::string_view id) override;
  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override;
  Result<std::vector<JobInfo>> ListFailedJobs(const store::ListFailedJobsParams& params) override;
  Result<std::vector<JobStatusCount>> SummarizeJobs() override;
  Result<JobStats> ComputeJobStats(const JobStatsFilter& params) override;
  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override;
  Status SetQueuePaused(std::string_view queue, bool paused) override;
  Result<std::vector<QueueInfo>> ListQueues() override;
  Result<long> DeleteFinishedJobs(const store::DeleteFinishedJobsParams& params) override;
  Result<long> ReconcileJobSets() override;
  Result<std::optional<std::string>> GetConfig(std::string_view key) override;
  Status SetConfig(std::string_view key, std::string_view value_json) override;

 private:
  std::shared_ptr<FaultPlan> plan_;
};

}  // namespace octop::fault_testing

#endif  // OCTOP_TESTS_FAULT_FAULTY_STORE_H_
