#include "faulty_store.h"

namespace octop::fault_testing {

std::string_view StoreOpName(StoreOp op) {
  static constexpr std::array<std::string_view, static_cast<std::size_t>(StoreOp::kCount)> kNames = {
      "Migrate",
      "SchemaVersion",
      "DatabaseNow",
      "CheckWritable",
      "CountBackstageSessions",
      "UpsertTask",
      "PollTasks",
      "TryClaimTask",
      "CheckTaskTicket",
      "TryReleaseTask",
      "TriggerTask",
      "CancelTask",
      "CapTaskNextRun",
      "SweepExpiredTaskRuns",
      "ListTasks",
      "Listen",
      "EnqueueJobs",
      "WithTransaction",
      "ClaimJobs",
      "CompleteJobs",
      "RescueExpiredJobs",
      "RenewJobLeases",
      "RetryJob",
      "CancelJob",
      "CancelRequestsFor",
      "GetJob",
      "ListJobs",
      "ListFailedJobs",
      "SummarizeJobs",
      "ComputeJobStats",
      "NextJobDueAt",
      "SetQueuePaused",
      "ListQueues",
      "DeleteFinishedJobs",
      "ReconcileJobSets",
      "GetConfig",
      "SetConfig",
  };
  const auto i = static_cast<std::size_t>(op);
  return i < kNames.size() ? kNames[i] : "?";
}

void FaultPlan::FailNext(StoreOp op, long count, FaultKind kind) {
  std::lock_guard lock(mu_);
  rules_[Index(op)] = Rule{count, kind};
}

void FaultPlan::Clear(StoreOp op) {
  std::lock_guard lock(mu_);
  rules_[Index(op)] = Rule{};
}

void FaultPlan::ClearAll() {
  std::lock_guard lock(mu_);
  rules_.fill(Rule{});
}

long FaultPlan::calls(StoreOp op) const {
  std::lock_guard lock(mu_);
  return calls_[Index(op)];
}

long FaultPlan::injected(StoreOp op) const {
  std::lock_guard lock(mu_);
  return injected_[Index(op)];
}

long FaultPlan::pending(StoreOp op) const {
  std::lock_guard lock(mu_);
  return rules_[Index(op)].remaining;
}

std::optional<FaultKind> FaultPlan::Take(StoreOp op) {
  std::lock_guard lock(mu_);
  ++calls_[Index(op)];
  Rule& rule = rules_[Index(op)];
  if (rule.remaining <= 0) return std::nullopt;
  if (rule.remaining != kForever) --rule.remaining;
  ++injected_[Index(op)];
  return rule.kind;
}

Status FaultyTaskStore::Migrate() {
  return Faulted(*plan_, StoreOp::kMigrate, [&] { return target().Migrate(); });
}

Status FaultyJobStore::Migrate() {
  return Faulted(*plan_, StoreOp::kMigrate, [&] { return target().Migrate(); });
}

Result<int> FaultyTaskStore::SchemaVersion() {
  return Faulted(*plan_, StoreOp::kSchemaVersion, [&] { return target().SchemaVersion(); });
}

Result<int> FaultyJobStore::SchemaVersion() {
  return Faulted(*plan_, StoreOp::kSchemaVersion, [&] { return target().SchemaVersion(); });
}

Status FaultyTaskStore::CheckWritable() {
  return Faulted(*plan_, StoreOp::kCheckWritable, [&] { return target().CheckWritable(); });
}

Status FaultyJobStore::CheckWritable() {
  return Faulted(*plan_, StoreOp::kCheckWritable, [&] { return target().CheckWritable(); });
}

Result<WallTime> FaultyTaskStore::DatabaseNow() {
  return Faulted(*plan_, StoreOp::kDatabaseNow, [&] { return target().DatabaseNow(); });
}

Result<WallTime> FaultyJobStore::DatabaseNow() {
  return Faulted(*plan_, StoreOp::kDatabaseNow, [&] { return target().DatabaseNow(); });
}

Result<int> FaultyTaskStore::CountBackstageSessions() {
  return Faulted(*plan_, StoreOp::kCountBackstageSessions, [&] { return target().CountBackstageSessions(); });
}

Status FaultyTaskStore::UpsertTask(const store::UpsertTaskParams& params) {
  return Faulted(*plan_, StoreOp::kUpsertTask, [&] { return target().UpsertTask(params); });
}

Result<store::PollTasksResult> FaultyTaskStore::PollTasks(const store::PollTasksParams& params) {
  return Faulted(*plan_, StoreOp::kPollTasks, [&] { return target().PollTasks(params); });
}

Result<std::optional<store::ClaimedRun>> FaultyTaskStore::TryClaimTask(const store::ClaimTaskParams& params) {
  return Faulted(*plan_, StoreOp::kTryClaimTask, [&] { return target().TryClaimTask(params); });
}

Result<bool> FaultyTaskStore::CheckTaskTicket(const store::CheckTaskTicketParams& params) {
  return Faulted(*plan_, StoreOp::kCheckTaskTicket, [&] { return target().CheckTaskTicket(params); });
}

Result<bool> FaultyTaskStore::TryReleaseTask(const store::ReleaseTaskParams& params) {
  return Faulted(*plan_, StoreOp::kTryReleaseTask, [&] { return target().TryReleaseTask(params); });
}

Status FaultyTaskStore::TriggerTask(const store::TriggerTaskParams& params) {
  return Faulted(*plan_, StoreOp::kTriggerTask, [&] { return target().TriggerTask(params); });
}

Status FaultyTaskStore::CancelTask(const store::CancelTaskParams& params) {
  return Faulted(*plan_, StoreOp::kCancelTask, [&] { return target().CancelTask(params); });
}

Result<bool> FaultyTaskStore::CapTaskNextRun(const store::CapTaskNextRunParams& params) {
  return Faulted(*plan_, StoreOp::kCapTaskNextRun, [&] { return target().CapTaskNextRun(params); });
}

Result<std::vector<std::string>> FaultyTaskStore::SweepExpiredTaskRuns(
    const store::SweepExpiredTaskRunsParams& params) {
  return Faulted(*plan_, StoreOp::kSweepExpiredTaskRuns,
                 [&] { return target().SweepExpiredTaskRuns(params); });
}

Result<std::vector<store::TaskRow>> FaultyTaskStore::ListTasks(const store::ListTasksParams& params) {
  return Faulted(*plan_, StoreOp::kListTasks, [&] { return target().ListTasks(params); });
}

Result<std::unique_ptr<store::Listener>> FaultyTaskStore::Listen(std::vector<std::string> channels) {
  return Faulted(*plan_, StoreOp::kListen, [&] { return target().Listen(std::move(channels)); });
}

Result<std::unique_ptr<store::Listener>> FaultyJobStore::Listen(std::vector<std::string> channels) {
  return Faulted(*plan_, StoreOp::kListen, [&] { return target().Listen(std::move(channels)); });
}

Result<std::vector<EnqueueResult>> FaultyJobStore::EnqueueJobs(const std::vector<JobSpec>& jobs) {
  return Faulted(*plan_, StoreOp::kEnqueueJobs, [&] { return target().EnqueueJobs(jobs); });
}

Status FaultyJobStore::WithTransaction(const std::function<Status(Transaction&)>& fn) {
  return Faulted(*plan_, StoreOp::kWithTransaction, [&] { return target().WithTransaction(fn); });
}

Result<std::vector<JobInfo>> FaultyJobStore::ClaimJobs(const store::ClaimJobsParams& params) {
  return Faulted(*plan_, StoreOp::kClaimJobs, [&] { return target().ClaimJobs(params); });
}

Result<std::vector<bool>> FaultyJobStore::CompleteJobs(const std::vector<store::JobCompletion>& completions) {
  return Faulted(*plan_, StoreOp::kCompleteJobs, [&] { return target().CompleteJobs(completions); });
}

Result<std::vector<store::RescuedJob>> FaultyJobStore::RescueExpiredJobs(
    const store::RescueExpiredJobsParams& params) {
  return Faulted(*plan_, StoreOp::kRescueExpiredJobs, [&] { return target().RescueExpiredJobs(params); });
}

Result<long> FaultyJobStore::RenewJobLeases(const store::RenewJobLeasesParams& params) {
  return Faulted(*plan_, StoreOp::kRenewJobLeases, [&] { return target().RenewJobLeases(params); });
}

Status FaultyJobStore::RetryJob(const store::RetryJobParams& params) {
  return Faulted(*plan_, StoreOp::kRetryJob, [&] { return target().RetryJob(params); });
}

Result<store::CancelJobResult> FaultyJobStore::CancelJob(const store::CancelJobParams& params) {
  return Faulted(*plan_, StoreOp::kCancelJob, [&] { return target().CancelJob(params); });
}

Result<std::vector<std::string>> FaultyJobStore::CancelRequestsFor(const std::vector<std::string>& tokens) {
  return Faulted(*plan_, StoreOp::kCancelRequestsFor, [&] { return target().CancelRequestsFor(tokens); });
}

Result<JobInfo> FaultyJobStore::GetJob(std::string_view id) {
  return Faulted(*plan_, StoreOp::kGetJob, [&] { return target().GetJob(id); });
}

Result<std::vector<JobInfo>> FaultyJobStore::ListJobs(const JobFilter& params) {
  return Faulted(*plan_, StoreOp::kListJobs, [&] { return target().ListJobs(params); });
}

Result<std::vector<JobInfo>> FaultyJobStore::ListFailedJobs(const store::ListFailedJobsParams& params) {
  return Faulted(*plan_, StoreOp::kListFailedJobs, [&] { return target().ListFailedJobs(params); });
}

Result<std::vector<JobStatusCount>> FaultyJobStore::SummarizeJobs() {
  return Faulted(*plan_, StoreOp::kSummarizeJobs, [&] { return target().SummarizeJobs(); });
}

Result<JobStats> FaultyJobStore::ComputeJobStats(const JobStatsFilter& params) {
  return Faulted(*plan_, StoreOp::kComputeJobStats, [&] { return target().ComputeJobStats(params); });
}

Result<std::optional<WallTime>> FaultyJobStore::NextJobDueAt(std::string_view queue) {
  return Faulted(*plan_, StoreOp::kNextJobDueAt, [&] { return target().NextJobDueAt(queue); });
}

Status FaultyJobStore::SetQueuePaused(std::string_view queue, bool paused) {
  return Faulted(*plan_, StoreOp::kSetQueuePaused, [&] { return target().SetQueuePaused(queue, paused); });
}

Result<std::vector<QueueInfo>> FaultyJobStore::ListQueues() {
  return Faulted(*plan_, StoreOp::kListQueues, [&] { return target().ListQueues(); });
}

Result<long> FaultyJobStore::DeleteFinishedJobs(const store::DeleteFinishedJobsParams& params) {
  return Faulted(*plan_, StoreOp::kDeleteFinishedJobs, [&] { return target().DeleteFinishedJobs(params); });
}

Result<long> FaultyJobStore::ReconcileJobSets() {
  return Faulted(*plan_, StoreOp::kReconcileJobSets, [&] { return target().ReconcileJobSets(); });
}

Result<std::optional<std::string>> FaultyJobStore::GetConfig(std::string_view key) {
  return Faulted(*plan_, StoreOp::kGetConfig, [&] { return target().GetConfig(key); });
}

Status FaultyJobStore::SetConfig(std::string_view key, std::string_view value_json) {
  return Faulted(*plan_, StoreOp::kSetConfig, [&] { return target().SetConfig(key, value_json); });
}

}  // namespace octop::fault_testing
