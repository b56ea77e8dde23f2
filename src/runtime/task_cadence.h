// TaskCadence: the parsed form of TaskSettingsV2.cadence plus the lengths the workers need, built once per
// settings value so that loops do not re-parse JSON or cron text on every wake-up.
//
// Thread-safety: an immutable value type (CronExpression copies share their parsed fields).
#ifndef OCTOP_RUNTIME_TASK_CADENCE_H_
#define OCTOP_RUNTIME_TASK_CADENCE_H_

#include <chrono>
#include <optional>
#include <string>

#include <octop/clock.h>
#include <octop/cron.h>
#include <octop/status.h>
#include <octop/task_settings.h>

#include "store/task_store.h"

namespace octop::runtime {

struct TaskCadence {
  CadenceKind kind = CadenceKind::kManual;
  std::optional<CronExpression> cron;                      // kCron
  std::string time_zone;                                   // kCron: "" = the node's local zone
  DstPolicy dst_policy;                                    // kCron
  std::chrono::microseconds period{0};                     // kDuration
  std::optional<std::chrono::microseconds> timeout;        // absent for Backstage's "" quirk
  std::optional<std::chrono::microseconds> initial_delay;  // absent or zero = none

  // InvalidArgument when the cadence or a duration does not parse (settings that Validate() accepts always
  // do, apart from the "" quirk, which is read as "no timeout" / "no delay").
  static Result<TaskCadence> FromSettings(const TaskSettingsV2& settings);

  // kCron: the next occurrence strictly after `after` in the task's zone; nullopt if there is none (logged by
  // the caller).
  Result<WallTime> NextCronAfter(WallTime after) const;

  // kCron: the occurrence a run claimed at due time `due_at` serves: the first occurrence at or after it,
  // when that lies within a second (a due time is written as the occurrence, or the occurrence minus one
  // second as Backstage registers it); nullopt for a due time off the schedule (a trigger).
  std::optional<WallTime> ServedOccurrence(std::optional<WallTime> due_at) const;

  // Where next_run_start_at goes when a run ends (release or cancel) at database time `db_now`: cron -> the
  // first occurrence after both `db_now` and the occurrence the run served (so a run that started up to a
  // second early, or ended before its occurrence, never leaves that occurrence due again: docs/scheduler.md,
  // "One run per occurrence"); duration -> a fixed rate after the planned start; manual -> NULL. `due_at` is
  // the run's ClaimedRun::due_at (or the row's next_run_start_at while it runs). A cron with no next
  // occurrence gives its error (the caller logs it and stores NULL).
  Result<store::TimeSpec> NextRunAfterRun(WallTime db_now, std::optional<WallTime> due_at) const;
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_TASK_CADENCE_H_
