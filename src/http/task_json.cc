#include "http/task_json.h"

#include <cstdio>
#include <cstdlib>

#include <date/tz.h>

namespace octop::http {

namespace {

const date::time_zone* LocalZone() {
  // The process's zone as luxon (Backstage) takes it: the TZ variable first (":Zone" too), then the host's.
  // An unknown name falls back to UTC, the honest answer.
  static const date::time_zone* zone = [] {
    try {
      if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0') {
        return date::locate_zone(tz[0] == ':' ? tz + 1 : tz);
      }
      return date::current_zone();
    } catch (const std::exception&) {
      return date::locate_zone("UTC");
    }
  }();
  return zone;
}

OrderedJson SettingsJson(const TaskSettingsV2& settings) { return OrderedJson::parse(settings.ToJson()); }

// Backstage writes a global task's times in the process's zone (luxon's local DateTime) and a local task's in
// UTC with a "Z" (DateTime.utc()); so does octop.
void PutTime(OrderedJson& j, const char* key, const std::optional<WallTime>& t, TaskScope scope) {
  if (!t) return;
  j[key] = scope == TaskScope::kLocal ? FormatUtcIsoMillis(*t) : FormatLocalIso(*t);
}

}  // namespace

std::string FormatUtcIsoMillis(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  return date::format("%Y-%m-%dT%H:%M:%S", ms) + "Z";
}

std::string FormatLocalIso(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  const auto info = LocalZone()->get_info(ms);
  const auto local = ms + info.offset;
  std::string out = date::format("%Y-%m-%dT%H:%M:%S", std::chrono::floor<std::chrono::seconds>(local));
  char buf[16];
  const auto millis = (local.time_since_epoch() % std::chrono::seconds(1)).count();
  std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(millis < 0 ? millis + 1000 : millis));
  out += buf;
  auto offset_min = std::chrono::duration_cast<std::chrono::minutes>(info.offset).count();
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
