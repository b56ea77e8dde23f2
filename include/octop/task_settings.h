// TaskSettingsV2: the settings of a recurring task as Backstage stores them in settings_json --
//   {"version":2,"cadence":"<cron | manual | ISO
//   duration>","timeoutAfterDuration":"<ISO>","initialDelayDuration":"<ISO>"}
// -- with the same validation (zod schema taskSettingsV2Schema) and the same JSON text (JSON.stringify key
// order: version, cadence, then initialDelayDuration when present, then timeoutAfterDuration, as Backstage
// builds the object; then octop's optional timeZone), so rows written by octop and by a Backstage backend are
// interchangeable.
//
// Thread-safety: a plain value type.
#ifndef OCTOP_TASK_SETTINGS_H_
#define OCTOP_TASK_SETTINGS_H_

#include <optional>
#include <string>
#include <string_view>

#include <octop/duration.h>
#include <octop/status.h>

namespace octop {

enum class CadenceKind {
  kCron,      // anything that is not "manual" and does not start with 'P'
  kDuration,  // starts with 'P'
  kManual,    // exactly "manual"
};

// The longest cadence, timeout or initial delay a task may have (a year counts 365 days). Longer ones are
// refused: a time point that far ahead would not fit the clocks' 64-bit nanoseconds (past the year 2262).
inline constexpr std::chrono::hours kMaxTaskDuration{24 * 365 * 100};
// `d` is at most kMaxTaskDuration long.
inline bool WithinMaxTaskDuration(const Duration& d) {
  return d.AsSeconds() <= static_cast<double>(std::chrono::seconds(kMaxTaskDuration).count());
}

struct TaskSettingsV2 {
  std::string cadence;
  std::string timeout_after_duration;
  std::optional<std::string> initial_delay_duration;
  // octop extension: the IANA zone a cron cadence is evaluated in (absent = the node's local zone, as
  // Backstage). Written as "timeZone" after the Backstage keys; Backstage's schema strips unknown keys, so it
  // still reads the row.
  std::optional<std::string> time_zone;
  // octop extension: how a cron cadence meets a DST transition (DstPolicy::Parse's text; absent =
  // "backstage"). Written as "dstPolicy" after timeZone; a Backstage node ignores it (docs/cron.md).
  std::optional<std::string> dst_policy;

  CadenceKind cadence_kind() const;

  // Validation identical to Backstage's schema: cadence must be a cron expression CronTime accepts, "manual",
  // or an ISO duration; timeoutAfterDuration an ISO duration; initialDelayDuration, when present, too.
  // (Backstage's quirk that "" passes the duration checks is kept.) InvalidArgument with zod's messages
  // ("Invalid cron", "Invalid duration, expecting ISO Period") naming the field.
  Status Validate() const;

  // The JSON text Backstage writes (see the header comment).
  std::string ToJson() const;
  // Parses settings_json: version must be the number 2; unknown keys are dropped; then Validate().
  static Result<TaskSettingsV2> FromJson(std::string_view json);

  friend bool operator==(const TaskSettingsV2&, const TaskSettingsV2&) = default;
};

}  // namespace octop

#endif  // OCTOP_TASK_SETTINGS_H_
