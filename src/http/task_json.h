// The JSON shapes of Backstage's scheduler REST API: the elements of GET .../v1/tasks (TaskApiTasksResponse)
// and the error body of Backstage's error middleware. Timestamps are written as luxon writes them for the
// process's local zone: "2025-04-11T20:35:13.418+02:00".
//
// Thread-safety: pure functions.
#ifndef OCTOP_HTTP_TASK_JSON_H_
#define OCTOP_HTTP_TASK_JSON_H_

#include <nlohmann/json.hpp>

#include <octop/clock.h>
#include <octop/scheduler.h>
#include <octop/status.h>

namespace octop::http {

using OrderedJson = nlohmann::ordered_json;

// "2025-04-11T20:35:13.418+02:00" in the process's local zone (TZ), milliseconds, numeric offset: a global
// task's times, as luxon writes a local DateTime.
std::string FormatLocalIso(WallTime t);
// "2025-04-11T18:35:13.418Z": a local task's times, as luxon writes DateTime.utc(), and the job API's.
std::string FormatUtcIso(WallTime t);

OrderedJson TaskStateEntryToJson(const TaskStateEntry& entry);
OrderedJson TasksResponseToJson(const std::vector<TaskStateEntry>& entries);  // {"tasks":[...]}

// {"error":{"name","message"},"request":{"method","url"},"response":{"statusCode"}}
OrderedJson ErrorBody(const Status& status, std::string_view method, std::string_view url);

}  // namespace octop::http

#endif  // OCTOP_HTTP_TASK_JSON_H_
