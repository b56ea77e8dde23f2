#include "runtime/plugin_scheduler_impl.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <octop/error_json.h>

namespace octop::runtime {

namespace {

Status Wrap(const Status& status, std::string_view prefix) {
  return Status(status.code(), std::string(prefix) + status.message());
}

// Backstage's persistTask: where a new row starts, and where an existing row may be moved
// (earlier only; the store applies that rule and the manual -> timed fix).
Result<store::UpsertTaskParams> UpsertParamsFor(const std::string& id, const TaskSettingsV2& settings,
                                                const TaskCadence& cadence, WallTime db_now) {
  store::UpsertTaskParams params{id, settings.ToJson(), store::NullTime{}, store::NullTime{}};
  switch (cadence.kind) {
    case CadenceKind::kCron: {
      Result<WallTime> next = cadence.NextCronAfter(db_now);
      if (!next.ok()) {
        return InvalidArgumentError("Invalid cron '" + settings.cadence + "', " + next.status().message());
      }
      // Minus one second, as Backstage writes it ("* * * * * *" is due at once). The run that claims it
      // serves the occurrence, and its release moves past it (TaskCadence::ServedOccurrence;
      // docs/scheduler.md, "One run per occurrence").
      params.next_start_at = store::AbsoluteTime{*next - std::chrono::seconds(1)};
      params.start_at = params.next_start_at;
      break;
    }
    case CadenceKind::kDuration:
      params.next_start_at = store::DbNowPlus{cadence.period};
      params.start_at = store::DbNowPlus{};
      break;
    case CadenceKind::kManual:
      break;
  }
  if (cadence.initial_delay.has_value()) params.start_at = store::DbNowPlus{*cadence.initial_delay};
  return params;
}

TaskState StateFromRow(const store::TaskRow& row) {
  TaskState state;
  state.last_run_ended_at = row.last_run_ended_at;
  state.last_run_error = row.last_run_error_json;
  if (row.current_run_started_at.has_value()) {
    state.status = TaskStatus::kRunning;
    state.started_at = row.current_run_started_at;
    state.times_out_at = row.current_run_expires_at;
  } else {
    state.status = TaskStatus::kIdle;
    state.starts_at = row.next_run_start_at;
  }
  return state;
}

}  // namespace

PluginSchedulerImpl::PluginSchedulerImpl(const SchedulerContext& context, std::string plugin_id,
                                         StoreFactory store_factory)
    : context_(context),
      plugin_id_(std::move(plugin_id)),
      store_factory_(std::move(store_factory)),
      local_(context, plugin_id_) {}

PluginSchedulerImpl::~PluginSchedulerImpl() { Join(); }

Result<store::TaskStore*> PluginSchedulerImpl::EnsureStore() {
  std::lock_guard lock(store_mu_);
  if (store_ != nullptr) return store_.get();
  if (store_closed_) return FailedPreconditionError("The scheduler has been shut down");
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<store::TaskStore> opened,
                         store_factory_(plugin_id_, *context_.clock));
  OCTOP_RETURN_IF_ERROR(opened->Migrate());
  const ClockReading before = context_.clock->Now();
  OCTOP_ASSIGN_OR_RETURN(WallTime db_now, opened->DatabaseNow());
  store_ = std::move(opened);
  global_ = std::make_unique<GlobalTaskWorker>(context_, plugin_id_, *store_, before, db_now);
  global_->Start();
  global_ready_.store(global_.get());
  return store_.get();
}

GlobalTaskWorker* PluginSchedulerImpl::global_worker() { return global_ready_.load(); }

Status PluginSchedulerImpl::ScheduleTask(TaskDefinition task) {
  OCTOP_RETURN_IF_ERROR(store::ValidateTaskId(task.id));
  if (!task.fn) return InvalidArgumentError("Task " + task.id + " has no function to run");
  const TaskScheduleDefinition schedule{task.frequency, task.timeout, task.initial_delay, task.scope};
  OCTOP_ASSIGN_OR_RETURN(TaskSettingsV2 settings, TaskSettingsFromSchedule(schedule));
  OCTOP_ASSIGN_OR_RETURN(TaskCadence cadence, TaskCadence::FromSettings(settings));
  {
    std::lock_guard lock(mu_);
    if (joined_) return FailedPreconditionError("The scheduler has been shut down");
  }

  if (task.scope == TaskScope::kGlobal) {
    Result<store::TaskStore*> store = EnsureStore();
    if (!store.ok()) return Wrap(store.status(), "Failed to persist task, ");
    OCTOP_ASSIGN_OR_RETURN(
        store::UpsertTaskParams params,
        UpsertParamsFor(task.id, settings, cadence, global_worker()->DatabaseNowEstimate()));
    Status upserted = (*store)->UpsertTask(params);
    if (!upserted.ok()) return Wrap(upserted, "Failed to persist task, ");
    // A Backstage node computes a cron task's next run in its own process's zone and by the package's walk,
    // whatever timeZone and dstPolicy say.
    const bool zoned = settings.time_zone && !settings.time_zone->empty();
    if (zoned || settings.dst_policy) {
      if (Result<int> peers = (*store)->CountBackstageSessions(); peers.ok() && *peers > 0) {
        context_.Log(
            LogLevel::kWarn,
            "Task " + plugin_id_ + "/" + task.id + " has " +
                (zoned ? "timeZone " + *settings.time_zone : "dstPolicy " + *settings.dst_policy) + ", but " +
                std::to_string(*peers) +
                " Backstage session(s) use this plugin's task table, and a Backstage node computes "
                "the next run in its own zone, by the npm package's walk (docs/scheduler.md, \"Sharing tasks "
                "with Backstage\")");
      }
    }
  }
  context_.Log(LogLevel::kInfo,
               "Registered scheduled task: " + plugin_id_ + "/" + task.id + ", " + settings.ToJson());

  std::lock_guard lock(mu_);
  if (joined_) return FailedPreconditionError("The scheduler has been shut down");
  auto it = std::find_if(descriptors_.begin(), descriptors_.end(),
                         [&](const TaskDescriptor& d) { return d.id == task.id; });
  if (it == descriptors_.end()) {
    descriptors_.push_back({task.id, task.scope, settings});
  } else {
    it->scope = task.scope;
    it->settings = settings;
  }
  if (task.scope == TaskScope::kGlobal) {
    local_.Unschedule(task.id);
    global_worker()->Schedule(task.id, std::move(settings), std::move(cadence), std::move(task.fn),
                              task.signal);
  } else {
    if (GlobalTaskWorker* global = global_worker()) global->Unschedule(task.id);
    local_.Schedule(task.id, std::move(settings), std::move(cadence), std::move(task.fn), task.signal);
  }
  return Status::Ok();
}

Status PluginSchedulerImpl::TriggerTask(std::string_view id) {
  if (local_.Has(id)) return local_.Trigger(id);
  OCTOP_ASSIGN_OR_RETURN(store::TaskStore * store, EnsureStore());
  OCTOP_RETURN_IF_ERROR(store->TriggerTask({std::string(id)}));
  // The store notifies every node; this node does not wait for its own notification to come back.
  global_worker()->NoteTriggered(id);
  return Status::Ok();
}

Status PluginSchedulerImpl::CancelTask(std::string_view id) {
  if (local_.Has(id)) return local_.Cancel(id);
  OCTOP_ASSIGN_OR_RETURN(store::TaskStore * store, EnsureStore());
  store::CancelTaskParams cancel{std::string(id), SerializeErrorMessage("Task was cancelled"), std::nullopt};
  // The cancelled run's next start, computed as a release would (as Backstage's cancel does): otherwise the
  // stale next_run_start_at makes the task claimable at once and a cancelled manual task runs again.
  OCTOP_ASSIGN_OR_RETURN(std::vector<store::TaskRow> rows,
                         store->ListTasks({std::vector<std::string>{std::string(id)}}));
  if (!rows.empty()) {
    Result<TaskSettingsV2> settings = TaskSettingsV2::FromJson(rows.front().settings_json);
    Result<TaskCadence> cadence = settings.ok() ? TaskCadence::FromSettings(*settings) : settings.status();
    if (cadence.ok()) {
      // A running row's next_run_start_at is still the due time its run was claimed at.
      Result<store::TimeSpec> next =
          cadence->NextRunAfterRun(global_worker()->DatabaseNowEstimate(), rows.front().next_run_start_at);
      if (next.ok()) cancel.next_run = *next;
    }
  }
  OCTOP_RETURN_IF_ERROR(store->CancelTask(cancel));
  global_worker()->NoteCancelled(id);
  return Status::Ok();
}

std::vector<TaskDescriptor> PluginSchedulerImpl::GetScheduledTasks() const {
  std::lock_guard lock(mu_);
  return descriptors_;
}

Result<std::vector<TaskStateEntry>> PluginSchedulerImpl::GetTaskStates() {
  const std::vector<TaskDescriptor> descriptors = GetScheduledTasks();
  std::vector<std::string> global_ids;
  for (const TaskDescriptor& d : descriptors) {
    if (d.scope == TaskScope::kGlobal) global_ids.push_back(d.id);
  }
  std::vector<store::TaskRow> rows;
  if (!global_ids.empty()) {
    OCTOP_ASSIGN_OR_RETURN(store::TaskStore * store, EnsureStore());
    OCTOP_ASSIGN_OR_RETURN(rows, store->ListTasks({global_ids}));
  }
  std::unordered_map<std::string_view, const store::TaskRow*> by_id;
  for (const store::TaskRow& row : rows) by_id.emplace(row.id, &row);

  std::vector<TaskStateEntry> entries;
  entries.reserve(descriptors.size());
  for (const TaskDescriptor& d : descriptors) {
    TaskStateEntry entry{d.id, plugin_id_, d.scope, d.settings, std::nullopt, std::nullopt};
    if (d.scope == TaskScope::kLocal) {
      if (auto snapshot = local_.State(d.id)) {
        entry.task_state = snapshot->task_state;
        entry.worker_state = snapshot->worker_state;
      }
    } else {
      if (auto row = by_id.find(d.id); row != by_id.end()) entry.task_state = StateFromRow(*row->second);
      if (GlobalTaskWorker* global = global_worker()) entry.worker_state = global->WorkerState(d.id);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

void PluginSchedulerImpl::Join() {
  {
    std::lock_guard lock(mu_);
    joined_ = true;
  }
  local_.Join();
  {
    std::lock_guard lock(store_mu_);
    store_closed_ = true;
  }
  if (global_ != nullptr) global_->Join();
}

}  // namespace octop::runtime
