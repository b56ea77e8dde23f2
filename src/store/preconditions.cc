#include "store/preconditions.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include <octop/task_settings.h>

#include "store/job_rules.h"

namespace octop::store {

namespace {

Status RequireStorable(std::string_view what, std::string_view text) {
  if (IsStorableText(text)) return Status::Ok();
  return InvalidArgumentError(std::string(what) + " is not valid UTF-8");
}

// Listings and claims take 1..1000 rows at a time.
Status RequireListLimit(std::string_view operation, int limit) {
  if (limit >= 1 && limit <= 1000) return Status::Ok();
  return InvalidArgumentError(std::string(operation) + ": limit must be 1..1000, got " +
                              std::to_string(limit));
}

// Every subscription names a channel.
Status RequireChannels(const std::vector<std::string>& channels) {
  if (channels.empty()) return InvalidArgumentError("Listen needs at least one channel");
  return Status::Ok();
}

// Text that no stored row can hold (not valid UTF-8, or a NUL): it matches nothing.
bool MatchesNothing(const std::optional<std::string>& text) { return text && !IsStorableText(*text); }

class CheckedTaskStore final : public TaskStoreWrapper {
 public:
  using TaskStoreWrapper::TaskStoreWrapper;

  Status UpsertTask(const UpsertTaskParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateTaskId(params.id));
    if (auto settings = TaskSettingsV2::FromJson(params.settings_json); !settings.ok()) {
      return InvalidArgumentError("Invalid settings for task " + params.id + ": " +
                                  settings.status().message());
    }
    if (std::holds_alternative<FixedRateAfter>(params.start_at) ||
        std::holds_alternative<FixedRateAfter>(params.next_start_at)) {
      return InvalidArgumentError("UpsertTask: a fixed-rate time is only meaningful when releasing a run");
    }
    return target().UpsertTask(params);
  }

  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    if (params.ticket.empty()) return InvalidArgumentError("TryClaimTask: the ticket must not be empty");
    OCTOP_RETURN_IF_ERROR(RequireStorable("TryClaimTask: the ticket", params.ticket));
    if (!IsStorableText(params.id)) return std::optional<ClaimedRun>();
    return target().TryClaimTask(params);
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    if (!IsStorableText(params.id) || !IsStorableText(params.ticket)) return false;
    return target().CheckTaskTicket(params);
  }

  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    if (params.error_json)
      OCTOP_RETURN_IF_ERROR(RequireStorable("TryReleaseTask: the error JSON", *params.error_json));
    if (!IsStorableText(params.id) || !IsStorableText(params.ticket)) return false;
    return target().TryReleaseTask(params);
  }

  Status TriggerTask(const TriggerTaskParams& params) override {
    if (!IsStorableText(params.id)) return NoSuchTask(params.id);
    return target().TriggerTask(params);
  }

  Status CancelTask(const CancelTaskParams& params) override {
    OCTOP_RETURN_IF_ERROR(RequireStorable("CancelTask: the error JSON", params.error_json));
    if (!IsStorableText(params.id)) return NoSuchTask(params.id);
    return target().CancelTask(params);
  }

  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    if (!IsStorableText(params.id)) return false;
    return target().CapTaskNextRun(params);
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    if (params.error_json) {
      OCTOP_RETURN_IF_ERROR(RequireStorable("SweepExpiredTaskRuns: the error JSON", *params.error_json));
    }
    return target().SweepExpiredTaskRuns(params);
  }

  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    OCTOP_RETURN_IF_ERROR(RequireChannels(channels));
    return target().Listen(std::move(channels));
  }
};

// A caller's transaction whose enqueues are checked as JobStore::EnqueueJobs's are.
class CheckedTransaction final : public Transaction {
 public:
  explicit CheckedTransaction(Transaction& target) : target_(target) {}
  Result<SqlRows> Execute(std::string_view sql,
                          const std::vector<std::optional<std::string>>& params) override {
    return target_.Execute(sql, params);
  }
  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
    return target_.EnqueueJobs(jobs);
  }
  std::string_view backend() const override { return target_.backend(); }

 private:
  Transaction& target_;
};

class CheckedJobStore final : public JobStoreWrapper {
 public:
  using JobStoreWrapper::JobStoreWrapper;

  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    OCTOP_RETURN_IF_ERROR(RequireChannels(channels));
    return target().Listen(std::move(channels));
  }

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
    return target().EnqueueJobs(jobs);
  }

  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override {
    return target().WithTransaction([&](Transaction& tx) {
      CheckedTransaction checked(tx);
      return fn(checked);
    });
  }

  Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", params.queue));
    OCTOP_RETURN_IF_ERROR(RequireListLimit("ClaimJobs", params.limit));
    if (params.timeout.count() < 0) return InvalidArgumentError("ClaimJobs: timeout must be >= 0");
    OCTOP_RETURN_IF_ERROR(RequireStorable("ClaimJobs: worker_id", params.worker_id));
    if (std::all_of(params.kinds.begin(), params.kinds.end(), IsStorableText))
      return target().ClaimJobs(params);
    // A kind no stored job can have matches nothing; if none is left, nothing can be claimed.
    ClaimJobsParams storable = params;
    std::erase_if(storable.kinds, [](const std::string& kind) { return !IsStorableText(kind); });
    if (storable.kinds.empty()) return std::vector<JobInfo>();
    return target().ClaimJobs(storable);
  }

  // Completions whose id is not a UUID or whose token cannot be text match no row: they are not applied, and
  // the backend sees only the others. Errors are cut to kMaxJobErrorBytes and negative delays read as 0. A
  // batch that needs none of this (every one the runtime sends) goes to the backend as it is, uncopied: this
  // is the queue's hottest path.
  Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) override {
    bool as_is = true;
    for (const JobCompletion& c : completions) {
      switch (c.outcome) {
        case JobOutcome::kSuccess:
        case JobOutcome::kRetry:
        case JobOutcome::kFail:
        case JobOutcome::kCancel:
        case JobOutcome::kRelease:
          break;
        default:
          return InvalidArgumentError("CompleteJobs: unknown outcome for job " + c.id);
      }
      as_is = as_is && IsJobId(c.id) && IsStorableText(c.attempt_token) && c.retry_delay.count() >= 0 &&
              (!c.error || (c.error->size() <= kMaxJobErrorBytes && IsStorableText(*c.error)));
    }
    if (as_is) {
      if (completions.empty()) return std::vector<bool>();
      return target().CompleteJobs(completions);
    }
    std::vector<JobCompletion> matchable;
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < completions.size(); ++i) {
      const JobCompletion& c = completions[i];
      if (!IsJobId(c.id) || !IsStorableText(c.attempt_token)) continue;
      matchable.push_back(c);
      if (matchable.back().error) matchable.back().error = TruncateJobError(*c.error);
      matchable.back().retry_delay = std::max(c.retry_delay, std::chrono::microseconds(0));
      positions.push_back(i);
    }
    std::vector<bool> applied(completions.size(), false);
    if (matchable.empty()) return applied;
    OCTOP_ASSIGN_OR_RETURN(std::vector<bool> done, target().CompleteJobs(matchable));
    for (std::size_t k = 0; k < positions.size() && k < done.size(); ++k) applied[positions[k]] = done[k];
    return applied;
  }

  Result<long> RenewJobLeases(const RenewJobLeasesParams& params) override {
    if (params.tokens.empty()) return 0L;
    return target().RenewJobLeases(params);
  }

  Status RetryJob(const RetryJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    return target().RetryJob(params);
  }

  Result<CancelJobResult> CancelJob(const CancelJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    return target().CancelJob(params);
  }

  Result<std::vector<std::string>> CancelRequestsFor(const std::vector<std::string>& tokens) override {
    if (tokens.empty()) return std::vector<std::string>{};
    return target().CancelRequestsFor(tokens);
  }

  Result<JobInfo> GetJob(std::string_view id) override {
    if (!IsJobId(id)) return NoSuchJob(id);
    return target().GetJob(id);
  }

  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override {
    OCTOP_RETURN_IF_ERROR(RequireListLimit("ListJobs", params.limit));
    if (params.offset < 0) return InvalidArgumentError("ListJobs: offset must be >= 0");
    if (MatchesNothing(params.queue) || MatchesNothing(params.kind)) return std::vector<JobInfo>();
    return target().ListJobs(params);
  }

  Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) override {
    OCTOP_RETURN_IF_ERROR(RequireListLimit("ListFailedJobs", params.limit));
    if (MatchesNothing(params.queue)) return std::vector<JobInfo>();
    return target().ListFailedJobs(params);
  }

  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override {
    if (!IsStorableText(queue)) return std::optional<WallTime>();
    return target().NextJobDueAt(queue);
  }

  Status SetQueuePaused(std::string_view queue, bool paused) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", queue));
    return target().SetQueuePaused(queue, paused);
  }

  Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) override {
    if (params.older_than.count() < 0)
      return InvalidArgumentError("DeleteFinishedJobs: older_than must be >= 0");
    if (params.limit < 1) return InvalidArgumentError("DeleteFinishedJobs: limit must be >= 1");
    for (JobStatus s : params.statuses) {
      if (s != JobStatus::kSuccess && s != JobStatus::kFrozen) {
        return InvalidArgumentError("DeleteFinishedJobs: only success and frozen jobs can be deleted, not " +
                                    std::string(JobStatusName(s)));
      }
    }
    if (params.statuses.empty()) return 0L;
    return target().DeleteFinishedJobs(params);
  }

  Result<std::optional<std::string>> GetConfig(std::string_view key) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    return target().GetConfig(key);
  }

  Status SetConfig(std::string_view key, std::string_view value_json) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    if (!IsStorableText(value_json) || !nlohmann::json::accept(value_json)) {
      return InvalidArgumentError("config value for " + std::string(key) + " is not valid JSON");
    }
    return target().SetConfig(key, value_json);
  }
};

}  // namespace

std::unique_ptr<TaskStore> WithTaskPreconditions(std::unique_ptr<TaskStore> backend) {
  return std::make_unique<CheckedTaskStore>(std::move(backend));
}

std::unique_ptr<JobStore> WithJobPreconditions(std::unique_ptr<JobStore> backend) {
  return std::make_unique<CheckedJobStore>(std::move(backend));
}

}  // namespace octop::store
