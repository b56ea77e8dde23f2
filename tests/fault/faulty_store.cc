#include "faulty_store.h"

namespace octop::fault_testing {

std::string_view StoreOpName(StoreOp op) {
  static constexpr std::array<std::string_view, static_cast<std::size_t>(StoreOp::kCount)> kNames = {
      "Migrate",           "SchemaVersion",      "MigrateTo",
      "AppliedMigrations", "DescribeTable",      "DescribeIndexes",
      "DatabaseNow",       "CheckWritable",      "CountBackstageSessions",
      "UpsertTask",        "PollTasks",          "TryClaimTask",
      "CheckTaskTicket",   "TryReleaseTask",     "TriggerTask",
      "CancelTask",        "CapTaskNextRun",     "SweepExpiredTaskRuns",
      "ListTasks",         "DeleteTask",         "Listen",
      "EnqueueJobs",       "WithTransaction",    "ClaimJobs",
      "CompleteJobs",      "RescueExpiredJobs",  "RenewJobLeases",
      "RetryJob",          "CancelJob",          "GetJob",
      "ListJobs",          "ListFailedJobs",     "SummarizeJobs",
      "ComputeJobStats",   "NextJobDueAt",       "SetQueuePaused",
      "ListQueues",        "DeleteFinishedJobs", "GetConfig",
      "SetConfig",         "ListConfig",
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

Status FaultyStore::Migrate() {
  return Guard(StoreOp::kMigrate, [&] { return inner_->Migrate(); });
}
Result<int> FaultyStore::SchemaVersion() {
  return Guard(StoreOp::kSchemaVersion, [&] { return inner_->SchemaVersion(); });
}
Status FaultyStore::MigrateTo(int version) {
  return Guard(StoreOp::kMigrateTo, [&] { return inner_->MigrateTo(version); });
}
Result<std::vector<std::string>> FaultyStore::AppliedMigrations() {
  return Guard(StoreOp::kAppliedMigrations, [&] { return inner_->AppliedMigrations(); });
}
Result<std::vector<store::ColumnInfo>> FaultyStore::DescribeTable(std::string_view table) {
  return Guard(StoreOp::kDescribeTable, [&] { return inner_->DescribeTable(table); });
}
Result<std::vector<store::IndexInfo>> FaultyStore::DescribeIndexes(std::string_view table) {
  return Guard(StoreOp::kDescribeIndexes, [&] { return inner_->DescribeIndexes(table); });
}
Status FaultyStore::CheckWritable() {
  return Guard(StoreOp::kCheckWritable, [&] { return inner_->CheckWritable(); });
}

Result<WallTime> FaultyStore::DatabaseNow() {
  return Guard(StoreOp::kDatabaseNow, [&] { return inner_->DatabaseNow(); });
}

Result<int> FaultyStore::CountBackstageSessions() {
  return Guard(StoreOp::kCountBackstageSessions, [&] { return inner_->CountBackstageSessions(); });
}
Status FaultyStore::UpsertTask(const store::UpsertTaskParams& params) {
  return Guard(StoreOp::kUpsertTask, [&] { return inner_->UpsertTask(params); });
}
Result<store::PollTasksResult> FaultyStore::PollTasks(const store::PollTasksParams& params) {
  return Guard(StoreOp::kPollTasks, [&] { return inner_->PollTasks(params); });
}
Result<std::optional<store::ClaimedRun>> FaultyStore::TryClaimTask(const store::ClaimTaskParams& params) {
  return Guard(StoreOp::kTryClaimTask, [&] { return inner_->TryClaimTask(params); });
}
Result<bool> FaultyStore::CheckTaskTicket(const store::CheckTaskTicketParams& params) {
  return Guard(StoreOp::kCheckTaskTicket, [&] { return inner_->CheckTaskTicket(params); });
}
Result<bool> FaultyStore::TryReleaseTask(const store::ReleaseTaskParams& params) {
  return Guard(StoreOp::kTryReleaseTask, [&] { return inner_->TryReleaseTask(params); });
}
Status FaultyStore::TriggerTask(const store::TriggerTaskParams& params) {
  return Guard(StoreOp::kTriggerTask, [&] { return inner_->TriggerTask(params); });
}
Status FaultyStore::CancelTask(const store::CancelTaskParams& params) {
  return Guard(StoreOp::kCancelTask, [&] { return inner_->CancelTask(params); });
}
Result<bool> FaultyStore::CapTaskNextRun(const store::CapTaskNextRunParams& params) {
  return Guard(StoreOp::kCapTaskNextRun, [&] { return inner_->CapTaskNextRun(params); });
}

Result<std::vector<std::string>> FaultyStore::SweepExpiredTaskRuns(
    const store::SweepExpiredTaskRunsParams& params) {
  return Guard(StoreOp::kSweepExpiredTaskRuns, [&] { return inner_->SweepExpiredTaskRuns(params); });
}
Result<std::vector<store::TaskRow>> FaultyStore::ListTasks(const store::ListTasksParams& params) {
  return Guard(StoreOp::kListTasks, [&] { return inner_->ListTasks(params); });
}
Status FaultyStore::DeleteTask(const store::DeleteTaskParams& params) {
  return Guard(StoreOp::kDeleteTask, [&] { return inner_->DeleteTask(params); });
}
Result<std::unique_ptr<store::Listener>> FaultyStore::Listen(std::vector<std::string> channels) {
  return Guard(StoreOp::kListen, [&] { return inner_->Listen(std::move(channels)); });
}
Result<std::vector<EnqueueResult>> FaultyStore::EnqueueJobs(const std::vector<JobSpec>& jobs) {
  return Guard(StoreOp::kEnqueueJobs, [&] { return inner_->EnqueueJobs(jobs); });
}
Status FaultyStore::WithTransaction(const std::function<Status(Transaction&)>& fn) {
  return Guard(StoreOp::kWithTransaction, [&] { return inner_->WithTransaction(fn); });
}
Result<std::vector<JobInfo>> FaultyStore::ClaimJobs(const store::ClaimJobsParams& params) {
  return Guard(StoreOp::kClaimJobs, [&] { return inner_->ClaimJobs(params); });
}
Result<std::vector<bool>> FaultyStore::CompleteJobs(const std::vector<store::JobCompletion>& completions) {
  return Guard(StoreOp::kCompleteJobs, [&] { return inner_->CompleteJobs(completions); });
}
Result<std::vector<store::RescuedJob>> FaultyStore::RescueExpiredJobs(
    const store::RescueExpiredJobsParams& params) {
  return Guard(StoreOp::kRescueExpiredJobs, [&] { return inner_->RescueExpiredJobs(params); });
}

Result<long> FaultyStore::RenewJobLeases(const store::RenewJobLeasesParams& params) {
  return Guard(StoreOp::kRenewJobLeases, [&] { return inner_->RenewJobLeases(params); });
}
Status FaultyStore::RetryJob(const store::RetryJobParams& params) {
  return Guard(StoreOp::kRetryJob, [&] { return inner_->RetryJob(params); });
}
Status FaultyStore::CancelJob(const store::CancelJobParams& params) {
  return Guard(StoreOp::kCancelJob, [&] { return inner_->CancelJob(params); });
}
Result<JobInfo> FaultyStore::GetJob(std::string_view id) {
  return Guard(StoreOp::kGetJob, [&] { return inner_->GetJob(id); });
}
Result<std::vector<JobInfo>> FaultyStore::ListJobs(const JobFilter& params) {
  return Guard(StoreOp::kListJobs, [&] { return inner_->ListJobs(params); });
}
Result<std::vector<JobInfo>> FaultyStore::ListFailedJobs(const store::ListFailedJobsParams& params) {
  return Guard(StoreOp::kListFailedJobs, [&] { return inner_->ListFailedJobs(params); });
}
Result<std::vector<JobStatusCount>> FaultyStore::SummarizeJobs() {
  return Guard(StoreOp::kSummarizeJobs, [&] { return inner_->SummarizeJobs(); });
}
Result<JobStats> FaultyStore::ComputeJobStats(const JobStatsFilter& params) {
  return Guard(StoreOp::kComputeJobStats, [&] { return inner_->ComputeJobStats(params); });
}
Result<std::optional<WallTime>> FaultyStore::NextJobDueAt(std::string_view queue) {
  return Guard(StoreOp::kNextJobDueAt, [&] { return inner_->NextJobDueAt(queue); });
}
Status FaultyStore::SetQueuePaused(std::string_view queue, bool paused) {
  return Guard(StoreOp::kSetQueuePaused, [&] { return inner_->SetQueuePaused(queue, paused); });
}
Result<std::vector<QueueInfo>> FaultyStore::ListQueues() {
  return Guard(StoreOp::kListQueues, [&] { return inner_->ListQueues(); });
}
Result<long> FaultyStore::DeleteFinishedJobs(const store::DeleteFinishedJobsParams& params) {
  return Guard(StoreOp::kDeleteFinishedJobs, [&] { return inner_->DeleteFinishedJobs(params); });
}
Result<std::optional<std::string>> FaultyStore::GetConfig(std::string_view key) {
  return Guard(StoreOp::kGetConfig, [&] { return inner_->GetConfig(key); });
}
Status FaultyStore::SetConfig(std::string_view key, std::string_view value_json) {
  return Guard(StoreOp::kSetConfig, [&] { return inner_->SetConfig(key, value_json); });
}
Result<std::vector<store::ConfigEntry>> FaultyStore::ListConfig() {
  return Guard(StoreOp::kListConfig, [&] { return inner_->ListConfig(); });
}

}  // namespace octop::fault_testing
