#include "runtime/task_cadence.h"

#include <octop/duration.h>

namespace octop::runtime {

namespace {

Result<std::optional<std::chrono::microseconds>> ParseOptionalLength(const std::optional<std::string>& iso) {
  if (!iso.has_value() || iso->empty()) return std::optional<std::chrono::microseconds>{};
  OCTOP_ASSIGN_OR_RETURN(Duration d, Duration::ParseIso(*iso));
  if (d.IsZero()) return std::optional<std::chrono::microseconds>{};
  return std::optional<std::chrono::microseconds>{d.ToChrono()};
}

}  // namespace

Result<TaskCadence> TaskCadence::FromSettings(const TaskSettingsV2& settings) {
  TaskCadence cadence;
  cadence.kind = settings.cadence_kind();
  switch (cadence.kind) {
    case CadenceKind::kCron: {
      OCTOP_ASSIGN_OR_RETURN(CronExpression cron, CronExpression::Parse(settings.cadence));
      cadence.cron = std::move(cron);
      cadence.time_zone = settings.time_zone.value_or("");
      if (!IsKnownTimeZone(cadence.time_zone)) {
        return InvalidArgumentError("Unknown time zone '" + cadence.time_zone + "' for cron '" +
                                    settings.cadence + "'");
      }
      if (settings.dst_policy) {
        OCTOP_ASSIGN_OR_RETURN(cadence.dst_policy, DstPolicy::Parse(*settings.dst_policy));
      }
      break;
    }
    case CadenceKind::kDuration: {
      OCTOP_ASSIGN_OR_RETURN(Duration d, Duration::ParseIso(settings.cadence));
      cadence.period = d.ToChrono();
      break;
    }
    case CadenceKind::kManual:
      break;
  }
  OCTOP_ASSIGN_OR_RETURN(cadence.timeout, ParseOptionalLength(settings.timeout_after_duration));
  OCTOP_ASSIGN_OR_RETURN(cadence.initial_delay, ParseOptionalLength(settings.initial_delay_duration));
  return cadence;
}

Result<WallTime> TaskCadence::NextCronAfter(WallTime after) const {
  if (!cron.has_value()) return InternalError("not a cron cadence");
  return cron->Next(after, time_zone, dst_policy);
}

std::optional<WallTime> TaskCadence::ServedOccurrence(std::optional<WallTime> due_at) const {
  if (!cron.has_value() || !due_at.has_value()) return std::nullopt;
  // Cron has whole-second resolution: the first occurrence at or after due_at is the next after the second
  // before it.
  const WallTime second_before = std::chrono::ceil<std::chrono::seconds>(*due_at) - std::chrono::seconds(1);
  Result<WallTime> occurrence = NextCronAfter(second_before);
  if (!occurrence.ok() || *occurrence - *due_at > std::chrono::seconds(1)) return std::nullopt;
  return *occurrence;
}

Result<store::TimeSpec> TaskCadence::NextRunAfterRun(WallTime db_now, std::optional<WallTime> due_at) const {
  switch (kind) {
    case CadenceKind::kManual:
      return store::TimeSpec(store::NullTime{});
    case CadenceKind::kDuration:
      return store::TimeSpec(store::FixedRateAfter{period});
    case CadenceKind::kCron: {
      const std::optional<WallTime> served = ServedOccurrence(due_at);
      OCTOP_ASSIGN_OR_RETURN(WallTime next, NextCronAfter(served ? std::max(db_now, *served) : db_now));
      return store::TimeSpec(store::AbsoluteTime{next});
    }
  }
  return store::TimeSpec(store::NullTime{});
}

}  // namespace octop::runtime
