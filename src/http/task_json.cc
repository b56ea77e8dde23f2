#include "http/task_json.h"

#include <cstdio>

#include <date/date.h>

#include <octop/cron.h>

namespace octop::http {

namespace {

OrderedJson SettingsJson(const TaskSettingsV2& settings) { return OrderedJson::parse(settings.ToJson()); }

// Backstage writes a global task's times in the process's zone (luxon's local DateTime) and a local task's in
// UTC with a "Z" (DateTime.utc()); so does octop.
void PutTime(OrderedJson& j, const char* key, const std::optional<WallTime>& t, TaskScope scope) {
  if (!t) return;
  j[key] = scope == TaskScope::kLocal ? FormatUtcIso(*t) : FormatLocalIso(*t);
}

}  // namespace

std::string FormatUtcIso(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  std::string out = date::format("%Y-%m-%dT%H:%M:%S", std::chrono::floor<std::chrono::seconds>(ms));
  char buf[8];
  auto millis = (ms.time_since_epoch() % std::chrono::seconds(1)).count();
  if (millis < 0) millis += 1000;
  std::snprintf(buf, sizeof buf, ".%03dZ", static_cast<int>(millis));
  return out + buf;
}

std::string FormatLocalIso(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  // The process's zone as cron reads it, which is how luxon (Backstage) reads it: TZ first.
  const std::chrono::seconds offset = UtcOffset(t).value_or(std::chrono::seconds(0));
  const auto local = ms + offset;
  std::string out = date::format("%Y-%m-%dT%H:%M:%S", std::chrono::floor<std::chrono::seconds>(local));
  char buf[16];
  const auto millis = (local.time_since_epoch() % std::chrono::seconds(1)).count();
  std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(millis < 0 ? millis + 1000 : millis));
  out += buf;
  auto offset_min = std::chrono::duration_cast<std::chrono::minutes>(offset).count();
  const char sign = offset_min < 0 ? '-' : '+';
  offset_min = offset_min < 0 ? -offset_min : offset_min;
  std::snprintf(buf, sizeof buf, "%c%02d:%02d", sign, static_cast<int>(offset_min / 60),
                static_cast<int>(offset_min % 60));
  out += buf;
  return out;
}

OrderedJson TaskStateEntryToJson(const TaskStateEntry& entry) {
  OrderedJson j;
  j["taskId"] = entry.task_id;
  j["pluginId"] = entry.plugin_id;
  j["scope"] = std::string(TaskScopeName(entry.scope));
  j["settings"] = SettingsJson(entry.settings);
  if (entry.task_state) {
    const TaskState& s = *entry.task_state;
    OrderedJson state;
    state["status"] = std::string(TaskStatusName(s.status));
    if (s.status == TaskStatus::kRunning) {
      PutTime(state, "startedAt", s.started_at, entry.scope);
      PutTime(state, "timesOutAt", s.times_out_at, entry.scope);
    } else {
      PutTime(state, "startsAt", s.starts_at, entry.scope);
    }
    PutTime(state, "lastRunEndedAt", s.last_run_ended_at, entry.scope);
    if (s.last_run_error) state["lastRunError"] = *s.last_run_error;
    j["taskState"] = std::move(state);
  } else {
    j["taskState"] = nullptr;
  }
  if (entry.worker_state) {
    j["workerState"] = OrderedJson{{"status", std::string(WorkerStatusName(*entry.worker_state))}};
  } else {
    j["workerState"] = nullptr;
  }
  return j;
}

OrderedJson TasksResponseToJson(const std::vector<TaskStateEntry>& entries) {
  OrderedJson tasks = OrderedJson::array();
  for (const TaskStateEntry& e : entries) tasks.push_back(TaskStateEntryToJson(e));
  return OrderedJson{{"tasks", std::move(tasks)}};
}

OrderedJson ErrorBody(const Status& status, std::string_view method, std::string_view url) {
  OrderedJson body;
  body["error"] = OrderedJson{{"name", std::string(ErrorName(status.code()))}, {"message", status.message()}};
  body["request"] = OrderedJson{{"method", std::string(method)}, {"url", std::string(url)}};
  body["response"] = OrderedJson{{"statusCode", HttpStatus(status.code())}};
  return body;
}

}  // namespace octop::http
