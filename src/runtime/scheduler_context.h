// SchedulerContext: what every part of one Scheduler shares -- the RuntimeContext (clock, log sink, shutdown
// stop token), its metrics and timing options. Owned by Scheduler::Impl, which outlives every plugin, worker
// and run thread that points to it.
//
// Thread-safety: immutable after construction; the logger and metrics are themselves thread-safe.
#ifndef OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_
#define OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <octop/clock.h>
#include <octop/scheduler.h>

#include "runtime/runtime_context.h"

namespace octop::runtime {

class SchedulerMetrics;

struct SchedulerContext : RuntimeContext {
  SchedulerMetrics* metrics = nullptr;
  std::chrono::milliseconds work_check_frequency{5000};
  std::chrono::milliseconds poll_interval{5000};
  std::chrono::milliseconds janitor_interval{60000};
};

// A stop_callback on a task's own signal (TaskInvocationDefinition::signal) that marks `fired` and wakes the
// worker's loop; nullptr without a signal. It may run inside this call when the signal is already stopped, so
// it touches only the atomic and the wake signal and must be built before the worker takes its lock.
using TaskSignalCallback = std::unique_ptr<std::stop_callback<std::function<void()>>>;
TaskSignalCallback MakeTaskSignalCallback(const std::optional<std::stop_token>& signal,
                                          const std::shared_ptr<std::atomic<bool>>& fired, WakeSignal& wake);

// The end of a worker's Join, shared by the global and local workers: fires every run's stop_token, waits for
// the run threads outside the lock (a run takes `mu` to record its outcome), then drops the runs and the
// tasks' signal callbacks -- the callbacks are destroyed after the lock is released, since destroying one
// waits for a callback that may be running and wants the lock. `tasks` maps ids to unique_ptr<Task> whose
// Task has `run` (unique_ptr to a struct with `stop` and `thread`) and `signal_callback`. REQUIRES: nothing
// starts new runs any more.
template <typename TaskMap>
void StopAndJoinRuns(std::mutex& mu, TaskMap& tasks) {
  using Run = typename std::decay_t<decltype(*tasks.begin()->second->run)>;
  std::vector<Run*> active;
  {
    std::lock_guard lock(mu);
    for (auto& [id, task] : tasks) {
      if (task->run != nullptr) {
        task->run->stop.request_stop();
        active.push_back(task->run.get());
      }
    }
  }
  for (Run* run : active) {
    if (run->thread.joinable()) run->thread.join();
  }
  std::vector<TaskSignalCallback> callbacks;
  {
    std::lock_guard lock(mu);
    for (auto& [id, task] : tasks) {
      task->run.reset();
      callbacks.push_back(std::move(task->signal_callback));
    }
  }
}

// Backstage's floor for readiness polling (TaskStatePoller's MIN_POLL_INTERVAL_MS).
inline constexpr std::chrono::milliseconds kMinPollInterval{100};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_
