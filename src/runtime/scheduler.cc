#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include <octop/cron.h>
#include <octop/scheduler.h>

#include "runtime/plugin_scheduler_impl.h"
#include "runtime/scheduler_context.h"
#include "runtime/scheduler_metrics.h"
#include "runtime/scheduler_opener.h"
#include "store/task_store.h"

namespace octop {

std::string_view TaskScopeName(TaskScope scope) { return scope == TaskScope::kGlobal ? "global" : "local"; }

std::string_view TaskStatusName(TaskStatus status) {
  return status == TaskStatus::kIdle ? "idle" : "running";
}

std::string_view WorkerStatusName(WorkerStatus status) {
  switch (status) {
    case WorkerStatus::kInitialWait:
      return "initial-wait";
    case WorkerStatus::kIdle:
      return "idle";
    case WorkerStatus::kRunning:
      return "running";
  }
  return "idle";
}

TaskDefinition TaskDefinition::Of(const TaskScheduleDefinition& schedule,
                                  TaskInvocationDefinition invocation) {
  return TaskDefinition{std::move(invocation.id),    schedule.frequency, schedule.timeout,
                        schedule.initial_delay,      schedule.scope,     std::move(invocation.fn),
                        std::move(invocation.signal)};
}

Result<TaskSettingsV2> TaskSettingsFromSchedule(const TaskScheduleDefinition& schedule) {
  TaskSettingsV2 settings;
  if (const auto* cron = std::get_if<CronFrequency>(&schedule.frequency)) {
    Result<CronExpression> parsed = CronExpression::Parse(cron->cron);
    if (!parsed.ok()) return InvalidArgumentError(parsed.status().message());
    settings.cadence = cron->cron;
    if (cron->time_zone.has_value()) {
      if (!IsKnownTimeZone(*cron->time_zone)) {
        return InvalidArgumentError("Unknown time zone '" + *cron->time_zone + "' for cron '" + cron->cron +
                                    "'");
      }
      settings.time_zone = cron->time_zone;
    }
    // The default is written as no key at all, so a row without a policy reads the same on every version.
    if (cron->dst_policy.has_value() && cron->dst_policy->wall_clock) {
      settings.dst_policy = cron->dst_policy->ToString();
    }
  } else if (const auto* duration = std::get_if<Duration>(&schedule.frequency)) {
    if (duration->IsZero())
      return InvalidArgumentError("Invalid duration, the frequency must be longer than zero");
    settings.cadence = duration->ToIso();
  } else {
    settings.cadence = "manual";
  }
  if (schedule.timeout.IsZero())
    return InvalidArgumentError("Invalid duration, the timeout must be longer than zero");
  settings.timeout_after_duration = schedule.timeout.ToIso();
  if (schedule.initial_delay.has_value()) settings.initial_delay_duration = schedule.initial_delay->ToIso();
  OCTOP_RETURN_IF_ERROR(settings.Validate());
  return settings;
}

TaskRunner PluginScheduler::CreateScheduledTaskRunner(TaskScheduleDefinition schedule) {
  return TaskRunner(*this, std::move(schedule));
}

Status TaskRunner::Run(TaskInvocationDefinition invocation) const {
  return scheduler_->ScheduleTask(TaskDefinition::Of(schedule_, std::move(invocation)));
}

namespace {

runtime::StoreFactory DefaultStoreFactory(std::string url, PluginDivision division, PostgresPooling pooling) {
  return [url = std::move(url), division = std::move(division), pooling = std::move(pooling)](
             const std::string& plugin_id, const Clock& clock) {
    store::StoreOptions options;
    options.ns = plugin_id;
    options.plugin_division = division;
    options.pooling = pooling;
    options.clock = &clock;
    return store::OpenTaskStore(url, options);
  };
}

}  // namespace

class Scheduler::Impl {
 public:
  // An empty factory: the plugins' stores open from options.database_url.
  Impl(SchedulerOptions opts, runtime::StoreFactory factory)
      : options(std::move(opts)),
        store_factory(
            factory ? std::move(factory)
                    : DefaultStoreFactory(options.database_url, options.plugin_division, options.pooling)),
        metrics(options.metrics_registry) {
    context.clock = options.clock != nullptr ? options.clock : &Clock::Real();
    context.logger = options.logger ? options.logger : runtime::DefaultLogger();
    context.metrics = &metrics;
    context.work_check_frequency = std::max(options.work_check_frequency, std::chrono::milliseconds(1));
    context.poll_interval = options.poll_interval.value_or(options.work_check_frequency);
    context.janitor_interval = options.janitor_interval;
    context.shutdown = stop.get_token();
  }

  SchedulerOptions options;
  runtime::StoreFactory store_factory;
  runtime::SchedulerMetrics metrics;
  std::stop_source stop;
  runtime::SchedulerContext context;

  mutable std::mutex mu;
  std::vector<std::unique_ptr<runtime::PluginSchedulerImpl>> plugins;  // guarded by mu
  bool shut_down = false;                                              // guarded by mu
};

Scheduler::Scheduler(SchedulerOptions options) : impl_(std::make_unique<Impl>(std::move(options), nullptr)) {}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Scheduler> runtime::SchedulerOpener::Create(SchedulerOptions options, StoreFactory factory) {
  return std::unique_ptr<Scheduler>(
      new Scheduler(std::make_unique<Scheduler::Impl>(std::move(options), std::move(factory))));
}

Scheduler::~Scheduler() { Shutdown(); }

PluginScheduler& Scheduler::ForPlugin(const std::string& plugin_id) {
  std::lock_guard lock(impl_->mu);
  for (auto& plugin : impl_->plugins) {
    if (plugin->plugin_id() == plugin_id) return *plugin;
  }
  impl_->plugins.push_back(
      std::make_unique<runtime::PluginSchedulerImpl>(impl_->context, plugin_id, impl_->store_factory));
  if (impl_->shut_down) impl_->plugins.back()->Join();  // born closed
  return *impl_->plugins.back();
}

PluginScheduler* Scheduler::FindPlugin(std::string_view plugin_id) {
  std::lock_guard lock(impl_->mu);
  for (auto& plugin : impl_->plugins) {
    if (plugin->plugin_id() == plugin_id) return plugin.get();
  }
  return nullptr;
}

std::vector<std::string> Scheduler::PluginIds() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> ids;
  for (const auto& plugin : impl_->plugins) ids.push_back(plugin->plugin_id());
  return ids;
}

void Scheduler::Shutdown() {
  std::vector<runtime::PluginSchedulerImpl*> plugins;
  {
    std::lock_guard lock(impl_->mu);
    impl_->shut_down = true;
    for (auto& plugin : impl_->plugins) plugins.push_back(plugin.get());
  }
  impl_->stop.request_stop();
  for (runtime::PluginSchedulerImpl* plugin : plugins) plugin->Join();
}

std::shared_ptr<prometheus::Registry> Scheduler::metrics_registry() const {
  return impl_->metrics.registry();
}

}  // namespace octop

namespace octop::runtime {

Logger DefaultLogger() {
  return [](LogLevel level, std::string_view message) {
    switch (level) {
      case LogLevel::kDebug:
        spdlog::debug("{}", message);
        break;
      case LogLevel::kInfo:
        spdlog::info("{}", message);
        break;
      case LogLevel::kWarn:
        spdlog::warn("{}", message);
        break;
      case LogLevel::kError:
        spdlog::error("{}", message);
        break;
    }
  };
}

TaskSignalCallback MakeTaskSignalCallback(const std::optional<std::stop_token>& signal,
                                          const std::shared_ptr<std::atomic<bool>>& fired, WakeSignal& wake) {
  if (!signal.has_value()) return nullptr;
  return std::make_unique<std::stop_callback<std::function<void()>>>(*signal, [fired, &wake] {
    fired->store(true);
    wake.Notify();
  });
}

}  // namespace octop::runtime
