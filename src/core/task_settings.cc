#include <nlohmann/json.hpp>

#include <octop/cron.h>
#include <octop/json_depth.h>
#include <octop/task_settings.h>

namespace octop {

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kInvalidDuration = "Invalid duration, expecting ISO Period";

// Backstage's isValidOptionalDurationString: only a truthy string is checked, so "" passes (a kept quirk).
bool IsValidOptionalDuration(const std::string& text) {
  return text.empty() || Duration::ParseIso(text).ok();
}

// A valid duration longer than kMaxTaskDuration.
bool IsTooLong(const std::string& text) {
  if (text.empty()) return false;
  Result<Duration> d = Duration::ParseIso(text);
  return d.ok() && !WithinMaxTaskDuration(*d);
}

bool IsValidCron(const std::string& text) { return !text.empty() && CronExpression::Parse(text).ok(); }

Status FieldError(std::string_view field, std::string_view message) {
  return InvalidArgumentError("Invalid task settings: " + std::string(field) + ": " + std::string(message));
}

Result<std::string> RequiredString(const OrderedJson& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return FieldError(key, "Required");
  if (!it->is_string()) return FieldError(key, "Expected string, received " + std::string(it->type_name()));
  return it->get<std::string>();
}

Result<std::optional<std::string>> OptionalString(const OrderedJson& j, std::string_view key) {
  auto it = j.find(key);
  // JSON.stringify drops undefined, but a null written by another tool is treated the same way.
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return FieldError(key, "Expected string, received " + std::string(it->type_name()));
  return std::optional<std::string>(it->get<std::string>());
}

}  // namespace

CadenceKind TaskSettingsV2::cadence_kind() const {
  if (cadence == "manual") return CadenceKind::kManual;
  if (cadence.starts_with('P')) return CadenceKind::kDuration;
  return CadenceKind::kCron;
}

Status TaskSettingsV2::Validate() const {
  if (!IsValidCron(cadence) && cadence != "manual" && !IsValidOptionalDuration(cadence)) {
    // zod reports every branch of the union; so do we, so the user sees what each form expects.
    return FieldError("cadence", "'" + cadence +
                                     "' is not valid: Invalid cron; Invalid trigger, expecting 'manual'; " +
                                     std::string(kInvalidDuration));
  }
  if (!IsValidOptionalDuration(timeout_after_duration)) {
    return FieldError("timeoutAfterDuration",
                      "'" + timeout_after_duration + "': " + std::string(kInvalidDuration));
  }
  if (initial_delay_duration && !IsValidOptionalDuration(*initial_delay_duration)) {
    return FieldError("initialDelayDuration",
                      "'" + *initial_delay_duration + "': " + std::string(kInvalidDuration));
  }
  for (const auto& [field, text] :
       {std::pair<std::string_view, const std::string*>{"cadence", &cadence},
        {"timeoutAfterDuration", &timeout_after_duration},
        {"initialDelayDuration", initial_delay_duration ? &*initial_delay_duration : nullptr}}) {
    if (text != nullptr && text->starts_with('P') && IsTooLong(*text)) {
      return FieldError(field, "'" + *text + "' is longer than 100 years");
    }
  }
  if (time_zone) {
    if (cadence_kind() != CadenceKind::kCron)
      return FieldError("timeZone", "only a cron cadence takes a time zone");
    if (time_zone->empty() || !IsKnownTimeZone(*time_zone)) {
      return FieldError("timeZone", "unknown time zone '" + *time_zone + "'");
    }
  }
  if (dst_policy) {
    if (cadence_kind() != CadenceKind::kCron)
      return FieldError("dstPolicy", "only a cron cadence takes a DST policy");
    if (Result<DstPolicy> policy = DstPolicy::Parse(*dst_policy); !policy.ok()) {
      return FieldError("dstPolicy", policy.status().message());
    }
  }
  return Status::Ok();
}

std::string TaskSettingsV2::ToJson() const {
  OrderedJson j;
  j["version"] = 2;
  j["cadence"] = cadence;
  if (initial_delay_duration) j["initialDelayDuration"] = *initial_delay_duration;
  j["timeoutAfterDuration"] = timeout_after_duration;
  if (time_zone) j["timeZone"] = *time_zone;
  if (dst_policy) j["dstPolicy"] = *dst_policy;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<TaskSettingsV2> TaskSettingsV2::FromJson(std::string_view json) {
  if (!JsonDepthAllowed(json)) {
    return InvalidArgumentError("Invalid task settings: nested deeper than " + std::to_string(kMaxJsonDepth) +
                                " levels");
  }
  OrderedJson j = OrderedJson::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("Invalid task settings: not valid JSON");
  if (!j.is_object()) return InvalidArgumentError("Invalid task settings: expected a JSON object");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number() || version->get<double>() != 2.0) {
    return FieldError("version", "Invalid literal value, expected 2");
  }
  TaskSettingsV2 settings;
  OCTOP_ASSIGN_OR_RETURN(settings.cadence, RequiredString(j, "cadence"));
  OCTOP_ASSIGN_OR_RETURN(settings.timeout_after_duration, RequiredString(j, "timeoutAfterDuration"));
  OCTOP_ASSIGN_OR_RETURN(settings.initial_delay_duration, OptionalString(j, "initialDelayDuration"));
  OCTOP_ASSIGN_OR_RETURN(settings.time_zone, OptionalString(j, "timeZone"));
  OCTOP_ASSIGN_OR_RETURN(settings.dst_policy, OptionalString(j, "dstPolicy"));
  OCTOP_RETURN_IF_ERROR(settings.Validate());
  return settings;
}

}  // namespace octop
