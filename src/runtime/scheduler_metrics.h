// SchedulerMetrics: Backstage's task-run instruments (docs/scheduler.md, "Metrics") in a prometheus-cpp
// registry, and the wrapper that runs a task function with them.
//
//   backend_tasks_task_runs_count{taskId,scope,result,plugin}     counter, +1 result="started" at the start
//   and +1
//                                                                  result="completed"|"failed" at the end
//   backend_tasks_task_runs_duration{taskId,scope,result,plugin}  histogram in seconds, at the end
//   backend_tasks_task_runs_started{taskId,scope,plugin}          gauge, epoch seconds of the last start
//   backend_tasks_task_runs_completed{taskId,scope,result,plugin} gauge, epoch seconds of the last end
// `plugin` is added to Backstage's labels because task ids are only unique within a plugin.
//
// Ownership: shares the registry with whoever serializes it (the HTTP layer). Thread-safety: all methods may
// be called from any thread (prometheus-cpp families and metrics are thread-safe).
#ifndef OCTOP_RUNTIME_SCHEDULER_METRICS_H_
#define OCTOP_RUNTIME_SCHEDULER_METRICS_H_

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <octop/clock.h>
#include <octop/scheduler.h>

namespace octop::runtime {

// How one run of a task function ended.
struct RunOutcome {
  std::optional<std::string> error;  // what() of the exception the function threw; nullopt = completed
  double seconds = 0;                // how long the function ran, on the scheduler's clock
};

class SchedulerMetrics {
 public:
  explicit SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry);

  // The buckets of backend_tasks_task_runs_duration, as Backstage's (docs/scheduler.md, "Metrics").
  static const std::vector<double>& DurationBuckets();

  // Calls fn(stop) inside the instruments: records the start, catches anything it throws, records the end.
  RunOutcome Run(const TaskFunction& fn, std::stop_token stop, const Clock& clock,
                 const std::string& plugin_id, const std::string& task_id, TaskScope scope);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* runs_count_;
  prometheus::Family<prometheus::Histogram>* runs_duration_;
  prometheus::Family<prometheus::Gauge>* runs_started_;
  prometheus::Family<prometheus::Gauge>* runs_completed_;
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_SCHEDULER_METRICS_H_
