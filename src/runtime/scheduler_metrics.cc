#include "runtime/scheduler_metrics.h"

#include <chrono>
#include <exception>

namespace octop::runtime {

namespace {

double EpochSeconds(WallTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

}  // namespace

SchedulerMetrics::SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(registry ? std::move(registry) : std::make_shared<prometheus::Registry>()),
      runs_count_(&prometheus::BuildCounter()
                       .Name("backend_tasks_task_runs_count")
                       .Help("Total number of times a task has been run")
                       .Register(*registry_)),
      runs_duration_(&prometheus::BuildHistogram()
                          .Name("backend_tasks_task_runs_duration")
                          .Help("Histogram of task run durations")
                          .Register(*registry_)),
      runs_started_(&prometheus::BuildGauge()
                         .Name("backend_tasks_task_runs_started")
                         .Help("Epoch timestamp seconds when the task was last started")
                         .Register(*registry_)),
      runs_completed_(&prometheus::BuildGauge()
                           .Name("backend_tasks_task_runs_completed")
                           .Help("Epoch timestamp seconds when the task was last completed")
                           .Register(*registry_)) {}

const std::vector<double>& SchedulerMetrics::DurationBuckets() {
  static const std::vector<double> buckets = {0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  return buckets;
}

RunOutcome SchedulerMetrics::Run(const TaskFunction& fn, std::stop_token stop, const Clock& clock,
                                 const std::string& plugin_id, const std::string& task_id, TaskScope scope) {
  const std::string scope_name(TaskScopeName(scope));
  runs_count_->Add({{"taskId", task_id}, {"scope", scope_name}, {"result", "started"}, {"plugin", plugin_id}})
      .Increment();
  runs_started_->Add({{"taskId", task_id}, {"scope", scope_name}, {"plugin", plugin_id}})
      .Set(EpochSeconds(clock.WallNow()));

  RunOutcome outcome;
  const SteadyTime start = clock.SteadyNow();
  try {
    if (fn) fn(std::move(stop));
  } catch (const std::exception& e) {
    outcome.error = e.what();
  } catch (...) {
    outcome.error = "Unknown error";
  }
  outcome.seconds = std::chrono::duration<double>(clock.SteadyNow() - start).count();

  const std::string result = outcome.error.has_value() ? "failed" : "completed";
  const prometheus::Labels labels = {
      {"taskId", task_id}, {"scope", scope_name}, {"result", result}, {"plugin", plugin_id}};
  runs_count_->Add(labels).Increment();
  runs_duration_->Add(labels, DurationBuckets()).Observe(outcome.seconds);
  runs_completed_->Add(labels).Set(EpochSeconds(clock.WallNow()));
  return outcome;
}

}  // namespace octop::runtime
