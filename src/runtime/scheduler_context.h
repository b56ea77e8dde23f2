// SchedulerContext: what every part of one Scheduler shares -- its clock, log sink, metrics, timing options
// and the shutdown stop token. Owned by Scheduler::Impl, which outlives every plugin, worker and run thread
// that points to it.
//
// Thread-safety: immutable after construction; the logger and metrics are themselves thread-safe.
#ifndef OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_
#define OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_

#include <chrono>
#include <stop_token>
#include <string>
#include <string_view>

#include <octop/clock.h>
#include <octop/scheduler.h>

namespace octop::runtime {

class SchedulerMetrics;

struct SchedulerContext {
  Clock* clock = nullptr;
  SchedulerLogger logger;
  SchedulerMetrics* metrics = nullptr;
  std::chrono::milliseconds work_check_frequency{5000};
  std::chrono::milliseconds poll_interval{5000};
  std::chrono::milliseconds janitor_interval{60000};
  std::stop_token shutdown;

  void Log(LogLevel level, std::string_view message) const {
    if (logger) logger(level, message);
  }
};

// Backstage's floor for readiness polling (TaskStatePoller's MIN_POLL_INTERVAL_MS).
inline constexpr std::chrono::milliseconds kMinPollInterval{100};
// How long a loop waits before retrying after an unexpected failure (a database outage), as Backstage does.
inline constexpr std::chrono::milliseconds kRetryAfterFailure{1000};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_SCHEDULER_CONTEXT_H_
