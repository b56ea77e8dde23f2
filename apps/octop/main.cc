// octop: the command line for a running octopd (tasks, trigger, cancel; jobs enqueue|list|summary|retry|
// cancel) and for the database (migrate, doctor).
//
// Exit codes: 0 success; 1 the server or database refused the operation (404, 409, 4xx; a failed check);
// 2 a usage error; 3 octopd or the database cannot be reached.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <octop/cron.h>
#include <octop/json_depth.h>

#include "core/json_text.h"
#include "daemon/daemon_config.h"
#include "store/job_store.h"
#include "store/task_store.h"

namespace {

using Json = nlohmann::ordered_json;

constexpr int kExitRefused = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;

struct Globals {
  std::string url;
  std::optional<std::string> token;
  std::optional<std::string> database;
  // Where plugins' tables are on PostgreSQL (--plugin-division-mode, or the config's database section).
  octop::PluginDivision division;
  // The config's database.preparedStatements / listenConnection (a pooler in transaction mode).
  octop::PostgresPooling pooling;
  std::string config_path;
  bool json = false;
};

std::string Env(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string EncodeSegment(std::string_view s) {
  std::ostringstream out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out << c;
    } else {
      out << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c);
    }
  }
  return out.str();
}

// `s` with control characters (C0, DEL, and C1 as UTF-8) shown as \xNN, so a value from the server cannot
// drive the terminal.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(s[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      const unsigned code = c1 ? static_cast<unsigned char>(s[++i]) : c;
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", code);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

struct HttpAnswer {
  int status = 0;
  std::string body;
  Json json;  // the body parsed; discarded when it is not JSON or nests deeper than kMaxJsonDepth
};

Json ParseAnswer(const std::string& body) {
  if (!octop::JsonDepthAllowed(body)) return Json(Json::value_t::discarded);
  return Json::parse(body, nullptr, false);
}

// The answer's JSON object; exits with kExitUnreachable when octopd (or whatever answered) sent none.
const Json& BodyObject(const HttpAnswer& a) {
  if (a.json.is_discarded() || !a.json.is_object()) {
    std::cerr << "octop: the server answered HTTP " << a.status
              << " without a JSON object; is --url octopd?\n";
    std::exit(kExitUnreachable);
  }
  return a.json;
}

// Calls octopd; exits with kExitUnreachable when it does not answer.
HttpAnswer Call(const Globals& g, const std::string& method, const std::string& path,
                const std::string& body = "") {
  httplib::Client client(g.url);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(30, 0);
  httplib::Headers headers;
  if (g.token) headers.emplace("Authorization", "Bearer " + *g.token);
  httplib::Result r =
      method == "POST" ? client.Post(path, headers, body, "application/json") : client.Get(path, headers);
  if (!r) {
    std::cerr << "octop: cannot reach octopd at " << g.url << ": " << httplib::to_string(r.error()) << "\n";
    std::exit(kExitUnreachable);
  }
  return {r->status, r->body, ParseAnswer(r->body)};
}

int Refused(const HttpAnswer& a) {
  const Json& body = a.json;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    std::cerr << "octop: " << Printable(body["error"].value("name", "Error")) << ": "
              << Printable(body["error"].value("message", "")) << "\n";
  } else {
    std::cerr << "octop: HTTP " << a.status << ": " << Printable(a.body.substr(0, 500)) << "\n";
  }
  return a.status == 401 || a.status >= 500 ? kExitUnreachable : kExitRefused;
}

std::string Cell(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

void PrintTable(std::vector<std::vector<std::string>> rows) {
  for (auto& row : rows) {
    for (std::string& cell : row) cell = Printable(cell);
  }
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      std::cout << row[i];
      if (i + 1 < row.size()) std::cout << std::string(widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << "\n";
  }
}

int Tasks(const Globals& g, const std::optional<std::string>& plugin) {
  std::vector<std::string> plugins;
  if (plugin) {
    plugins.push_back(*plugin);
  } else {
    HttpAnswer a = Call(g, "GET", "/api/octop/v1/plugins");
    if (a.status != 200) return Refused(a);
    const Json& body = BodyObject(a);
    for (const auto& p : body.value("plugins", Json::array())) plugins.push_back(p.get<std::string>());
  }
  Json all = Json::array();
  for (const std::string& p : plugins) {
    HttpAnswer a = Call(g, "GET", "/api/" + EncodeSegment(p) + "/.backstage/scheduler/v1/tasks");
    if (a.status != 200) return Refused(a);
    const Json& body = BodyObject(a);
    for (const auto& t : body.value("tasks", Json::array())) all.push_back(t);
  }
  if (g.json) {
    std::cout << Json{{"tasks", all}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"PLUGIN", "TASK", "SCOPE", "CADENCE", "STATUS", "NEXT/STARTED", "LAST ENDED", "WORKER", "LAST ERROR"}};
  for (const Json& t : all) {
    const Json state = t.value("taskState", Json());
    const std::string status = state.is_object() ? Cell(state, "status") : "-";
    std::string when = "-";
    if (state.is_object()) when = status == "running" ? Cell(state, "startedAt") : Cell(state, "startsAt");
    std::string error = "-";
    if (state.is_object() && state.contains("lastRunError") && state["lastRunError"].is_string()) {
      Json e = ParseAnswer(state["lastRunError"].get<std::string>());
      error = !e.is_discarded() && e.is_object() ? e.value("message", "")
                                                 : state["lastRunError"].get<std::string>();
      if (error.size() > 60) error = error.substr(0, 57) + "...";
    }
    const Json worker = t.value("workerState", Json());
    rows.push_back({Cell(t, "pluginId"), Cell(t, "taskId"), Cell(t, "scope"),
                    Cell(t.value("settings", Json::object()), "cadence"), status, when,
                    state.is_object() ? Cell(state, "lastRunEndedAt") : "-",
                    worker.is_object() ? Cell(worker, "status") : "-", error});
  }
  PrintTable(rows);
  return 0;
}

int Act(const Globals& g, const std::string& action, const std::string& plugin, const std::string& id) {
  HttpAnswer a = Call(
      g, "POST",
      "/api/" + EncodeSegment(plugin) + "/.backstage/scheduler/v1/tasks/" + EncodeSegment(id) + "/" + action);
  if (a.status != 200) return Refused(a);
  if (g.json) {
    std::cout << Json{{"plugin", plugin},
                      {"task", id},
                      {"result", action == "trigger" ? "triggered" : "cancelled"}}
                     .dump()
              << "\n";
  } else {
    std::cout << (action == "trigger" ? "triggered " : "cancelled ") << plugin << "/" << id << "\n";
  }
  return 0;
}

// ---- octop jobs -------------------------------------------------------------------------------------------

struct JobArgs {
  std::string kind;
  std::string payload = "{}";
  std::optional<std::string> queue;
  std::optional<int> priority;
  std::optional<std::string> at;
  std::optional<std::string> unique_key;
  std::optional<int> max_retries;
  std::optional<std::string> status;
  std::optional<std::string> filter_kind;
  int limit = 50;
  std::string id;
};

std::string ErrorMessageOf(const Json& job) {
  std::string error = Cell(job, "lastError");
  for (char& c : error) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return error.size() > 60 ? error.substr(0, 57) + "..." : error;
}

int JobsEnqueue(const Globals& g, const JobArgs& a) {
  std::string text = a.payload;
  if (text == "-") {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = in.str();
  }
  Json payload = ParseAnswer(text);
  if (payload.is_discarded()) {
    std::cerr << "octop: --payload is not valid JSON (or nests deeper than " << octop::kMaxJsonDepth
              << " levels): " << Printable(text.substr(0, 200)) << "\n";
    return kExitUsage;
  }
  Json body{{"kind", a.kind}};
  if (a.queue) body["queue"] = *a.queue;
  if (a.priority) body["priority"] = *a.priority;
  if (a.at) body["scheduledAt"] = *a.at;
  if (a.unique_key) body["uniqueKey"] = *a.unique_key;
  if (a.max_retries) body["maxRetries"] = *a.max_retries;
  // The payload goes as written, not as nlohmann would print it again (core/json_text.h).
  const std::string request =
      octop::text::JoinJsonObjects({body.dump(), "{\"payload\":" + octop::text::CompactJson(text) + "}"});
  HttpAnswer r = Call(g, "POST", "/api/octop/v1/jobs", request);
  if (r.status != 200 && r.status != 201) return Refused(r);
  const Json& answer = BodyObject(r);
  if (g.json) {
    std::cout << answer.dump() << "\n";
  } else {
    std::cout << (answer.value("existing", false) ? "existing " : "enqueued ")
              << Printable(answer.value("id", "")) << "\n";
  }
  return 0;
}

int JobsList(const Globals& g, const JobArgs& a) {
  std::string path = "/api/octop/v1/jobs?limit=" + std::to_string(a.limit);
  if (a.status) path += "&status=" + EncodeSegment(*a.status);
  if (a.queue) path += "&queue=" + EncodeSegment(*a.queue);
  if (a.filter_kind) path += "&kind=" + EncodeSegment(*a.filter_kind);
  HttpAnswer r = Call(g, "GET", path);
  if (r.status != 200) return Refused(r);
  const Json& body = BodyObject(r);
  if (g.json) {
    std::cout << r.body << "\n";  // as octopd sent it: a payload's numbers keep every digit
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"ID", "QUEUE", "KIND", "STATUS", "ATTEMPT", "SCHEDULED", "COMPLETED", "LAST ERROR"}};
  for (const Json& j : body.value("jobs", Json::array())) {
    rows.push_back({Cell(j, "id"), Cell(j, "queue"), Cell(j, "kind"), Cell(j, "status"),
                    Cell(j, "attempt") + "/" + std::to_string(j.value("maxRetries", 0) + 1),
                    Cell(j, "scheduledAt"), Cell(j, "completedAt"), ErrorMessageOf(j)});
  }
  PrintTable(rows);
  return 0;
}

int JobsSummary(const Globals& g) {
  HttpAnswer r = Call(g, "GET", "/api/octop/v1/jobs/summary");
  if (r.status != 200) return Refused(r);
  const Json& body = BodyObject(r);
  if (g.json) {
    std::cout << r.body << "\n";  // as octopd sent it: a payload's numbers keep every digit
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"QUEUE", "STATUS", "COUNT", "OLDEST SCHEDULED", "AVG DELAY (s)"}};
  for (const Json& c : body.value("counts", Json::array())) {
    std::string delay = "-";
    if (c.contains("averageDelaySeconds") && c["averageDelaySeconds"].is_number()) {
      std::ostringstream out;
      out << std::fixed << std::setprecision(3) << c["averageDelaySeconds"].get<double>();
      delay = out.str();
    }
    rows.push_back(
        {Cell(c, "queue"), Cell(c, "status"), Cell(c, "count"), Cell(c, "oldestScheduledAt"), delay});
  }
  PrintTable(rows);
  const Json paused = body.value("pausedQueues", Json::array());
  if (!paused.empty()) {
    std::cout << "\npaused queues:";
    for (const auto& q : paused) std::cout << " " << Printable(q.get<std::string>());
    std::cout << "\n";
  }
  const Json latest_failed = body.value("latestFailed", Json::array());
  if (!latest_failed.empty()) {
    std::cout << "\nlatest failed and frozen jobs:\n";
    std::vector<std::vector<std::string>> failed{{"ID", "QUEUE", "KIND", "STATUS", "ATTEMPT", "LAST ERROR"}};
    for (const Json& j : latest_failed) {
      failed.push_back({Cell(j, "id"), Cell(j, "queue"), Cell(j, "kind"), Cell(j, "status"),
                        Cell(j, "attempt"), ErrorMessageOf(j)});
    }
    PrintTable(failed);
  }
  return 0;
}

int JobsAct(const Globals& g, const std::string& action, const std::string& id) {
  HttpAnswer r = Call(g, "POST", "/api/octop/v1/jobs/" + EncodeSegment(id) + "/" + action);
  if (r.status != 200) return Refused(r);
  const Json& job = BodyObject(r);
  if (g.json) {
    std::cout << r.body << "\n";  // as octopd sent it: a payload's numbers keep every digit
  } else {
    const std::string status = job.value("status", "?");
    if (action == "cancel" && status == "running") {
      // Its node stops it (docs/jobs.md, "Cancelling a running job").
      std::cout << "stop requested for " << id << " (running; it ends frozen unless it finishes first)\n";
    } else {
      std::cout << (action == "retry" ? "retried " : "cancelled ") << id << " (now " << Printable(status)
                << ")\n";
    }
  }
  return 0;
}

std::vector<std::string> PluginsFromConfig(const Globals& g) {
  std::vector<std::string> out;
  if (g.config_path.empty()) return out;
  auto config = octop::daemon::LoadDaemonConfig(g.config_path);
  if (!config.ok()) return out;
  for (const auto& p : config->plugins) out.push_back(p.id);
  return out;
}

// "octop" is the job queue's namespace; every other is a plugin's.
std::optional<octop::PluginDivision> PluginPlacement(const Globals& g, const std::string& ns) {
  if (ns == "octop") return std::nullopt;
  return g.division;
}

int Migrate(const Globals& g, std::vector<std::string> plugins) {
  if (!g.database) {
    std::cerr << "octop: migrate needs --database or --config\n";
    return kExitUsage;
  }
  if (plugins.empty()) plugins = PluginsFromConfig(g);
  plugins.insert(plugins.begin(), "octop");
  // Every namespace is checked before any store is opened (opening creates an SQLite file) and every store
  // opened before any is migrated: a bad --plugin among good ones leaves the database untouched.
  for (const std::string& ns : plugins) {
    if (octop::Status s = octop::store::ValidateStoreNamespace(*g.database, ns, PluginPlacement(g, ns));
        !s.ok()) {
      std::cerr << "octop: " << ns << ": " << s.message() << "\n";
      return kExitUsage;
    }
  }
  // The first namespace is the job queue's, the others plugins' task tables: each has its own migration line.
  std::vector<std::unique_ptr<octop::store::Store>> stores;
  for (const std::string& ns : plugins) {
    auto open = [&]() -> octop::Result<std::unique_ptr<octop::store::Store>> {
      if (stores.empty()) {
        OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<octop::store::JobStore> jobs,
                               octop::store::OpenJobStore(*g.database, {.ns = ns, .pooling = g.pooling}));
        return std::unique_ptr<octop::store::Store>(std::move(jobs));
      }
      OCTOP_ASSIGN_OR_RETURN(
          std::unique_ptr<octop::store::TaskStore> tasks,
          octop::store::OpenTaskStore(
              *g.database, {.ns = ns, .plugin_division = PluginPlacement(g, ns), .pooling = g.pooling}));
      return std::unique_ptr<octop::store::Store>(std::move(tasks));
    };
    octop::Result<std::unique_ptr<octop::store::Store>> store = open();
    if (!store.ok()) {
      std::cerr << "octop: " << ns << ": " << store.status().message() << "\n";
      // An unknown scheme or a bad namespace is the caller's mistake, not an unreachable database.
      return store.status().code() == octop::StatusCode::kInvalidArgument ? kExitUsage : kExitUnreachable;
    }
    stores.push_back(std::move(*store));
  }
  Json report = Json::array();
  for (std::size_t i = 0; i < plugins.size(); ++i) {
    const std::string& ns = plugins[i];
    octop::store::Store* store = stores[i].get();
    if (octop::Status s = store->Migrate(); !s.ok()) {
      std::cerr << "octop: migrate " << ns << ": " << s.message() << "\n";
      return s.code() == octop::StatusCode::kUnavailable ? kExitUnreachable : kExitRefused;
    }
    auto version = store->SchemaVersion();
    report.push_back({{"namespace", ns}, {"schemaVersion", version.value_or(-1)}});
    if (!g.json) std::cout << "migrated " << ns << " to schema version " << version.value_or(-1) << "\n";
  }
  if (g.json) std::cout << report.dump(2) << "\n";
  return 0;
}

struct CronArgs {
  std::string expression;
  std::string tz;
  int count = 5;
  std::string after;  // YYYY-MM-DDTHH:MM:SSZ; default now
  std::string dst_policy = "backstage";
};

// `instant` in zone `tz` ("" = local) as YYYY-MM-DDTHH:MM:SS+HH:MM, the zone read as cron reads it.
std::string ZonedTime(octop::WallTime instant, const std::string& tz) {
  const std::chrono::seconds offset = octop::UtcOffset(instant, tz).value_or(std::chrono::seconds(0));
  const std::time_t local = std::chrono::system_clock::to_time_t(instant + offset);
  std::tm tm{};
  ::gmtime_r(&local, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  const int offset_minutes = static_cast<int>(std::abs(offset.count()) / 60);  // under 26 h
  char zone[16];
  std::snprintf(zone, sizeof zone, "%c%02d:%02d", offset.count() < 0 ? '-' : '+', offset_minutes / 60 % 100,
                offset_minutes % 60);
  return std::string(date) + zone;
}

// The ids of the config's cron tasks in plugin `plugin` that name a timeZone or a wall-clock dstPolicy.
std::vector<std::string> CronTasksABackstageNodeMisreads(const Globals& g, const std::string& plugin) {
  std::vector<std::string> out;
  if (g.config_path.empty()) return out;
  auto config = octop::daemon::LoadDaemonConfig(g.config_path);
  if (!config.ok()) return out;
  for (const auto& p : config->plugins) {
    if (p.id != plugin) continue;
    for (const auto& task : p.tasks) {
      const auto* cron = std::get_if<octop::CronFrequency>(&task.schedule.frequency);
      if (cron != nullptr && ((cron->time_zone && !cron->time_zone->empty()) ||
                              (cron->dst_policy && cron->dst_policy->wall_clock))) {
        out.push_back(task.id);
      }
    }
  }
  return out;
}

// The next fire times of a cron expression, as a scheduler would compute them (docs/cron.md).
int CronNext(const Globals& g, const CronArgs& a) {
  auto cron = octop::CronExpression::Parse(a.expression);
  if (!cron.ok()) {
    std::cerr << "octop: " << cron.status().message() << "\n";
    return kExitUsage;
  }
  if (!octop::IsKnownTimeZone(a.tz)) {
    std::cerr << "octop: unknown time zone '" << a.tz << "'\n";
    return kExitUsage;
  }
  auto policy = octop::DstPolicy::Parse(a.dst_policy);
  if (!policy.ok()) {
    std::cerr << "octop: " << policy.status().message() << "\n";
    return kExitUsage;
  }
  octop::WallTime from = std::chrono::system_clock::now();
  if (!a.after.empty()) {
    std::tm tm{};
    const char* end = ::strptime(a.after.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end == nullptr || *end != '\0') {
      std::cerr << "octop: --after must be YYYY-MM-DDTHH:MM:SSZ, got '" << a.after << "'\n";
      return kExitUsage;
    }
    from = std::chrono::system_clock::from_time_t(::timegm(&tm));
  }
  Json out = Json::array();
  for (int i = 0; i < a.count; ++i) {
    auto next = cron->Next(from, a.tz, *policy);
    if (!next.ok()) {
      if (!g.json) std::cout << "(" << next.status().message() << ")\n";
      break;
    }
    const std::string shown = ZonedTime(*next, a.tz);
    out.push_back(shown);
    if (!g.json) std::cout << shown << "\n";
    from = *next;
  }
  if (g.json) std::cout << out.dump() << "\n";
  return 0;
}

int Doctor(const Globals& g, std::vector<std::string> plugins) {
  if (!g.database) {
    std::cerr << "octop: doctor needs --database or --config\n";
    return kExitUsage;
  }
  if (plugins.empty()) plugins = PluginsFromConfig(g);
  Json checks = Json::array();
  bool healthy = true;
  auto add = [&](const std::string& name, bool ok, const std::string& detail) {
    healthy = healthy && ok;
    checks.push_back({{"check", name}, {"ok", ok}, {"detail", detail}});
    if (!g.json) std::cout << (ok ? "ok    " : "FAIL  ") << name << ": " << detail << "\n";
  };
  // A namespace's schema against its line's latest version: the job queue's (octop) and each plugin's.
  auto check_schema = [&](const std::string& ns, octop::store::Store& store, int latest) {
    auto version = store.SchemaVersion();
    if (!version.ok()) {
      add("schema " + ns, false, version.status().message());
      return;
    }
    add("schema " + ns, *version == latest,
        "version " + std::to_string(*version) + " of " + std::to_string(latest) +
            (*version < latest ? " (run: octop migrate)" : ""));
  };
  auto store = octop::store::OpenJobStore(*g.database, {.ns = "octop", .pooling = g.pooling});
  if (!store.ok() && store.status().code() == octop::StatusCode::kInvalidArgument) {
    std::cerr << "octop: --database: " << store.status().message() << "\n";  // a usage error, not a check
    return kExitUsage;
  }
  if (!store.ok()) {
    add("database", false, store.status().message());
  } else {
    const auto before = std::chrono::system_clock::now();
    auto now = (*store)->DatabaseNow();
    const auto after = std::chrono::system_clock::now();
    if (!now.ok()) {
      add("database", false, now.status().message());
    } else {
      add("database", true, std::string((*store)->backend()) + " reachable");
      const auto local = before + (after - before) / 2;
      const auto skew_ms = std::chrono::duration_cast<std::chrono::milliseconds>(local - *now).count();
      // Cross-node decisions use the database's clock, but cron times and timestamps come from the node's: a
      // skew beyond a second makes cron tasks fire early or late by that much.
      add("clock skew", std::llabs(skew_ms) <= 1000,
          "this node is " + std::to_string(skew_ms) + " ms " + (skew_ms >= 0 ? "ahead of" : "behind") +
              " the database (limit 1000 ms)");
      check_schema("octop", **store, octop::store::kLatestJobSchemaVersion);
    }
  }
  for (const std::string& ns : plugins) {
    auto s = octop::store::OpenTaskStore(
        *g.database, {.ns = ns, .plugin_division = PluginPlacement(g, ns), .pooling = g.pooling});
    if (!s.ok()) {
      add("schema " + ns, false, s.status().message());
      continue;
    }
    check_schema(ns, **s, octop::store::kLatestTaskSchemaVersion);
    // A Backstage node on this plugin's table computes cron runs in its own zone and by the package's walk,
    // whatever timeZone and dstPolicy say.
    const std::vector<std::string> zoned = CronTasksABackstageNodeMisreads(g, ns);
    auto sessions = (*s)->CountBackstageSessions();
    if (sessions.ok() && *sessions > 0) {
      add("backstage " + ns, zoned.empty(),
          std::to_string(*sessions) + " Backstage session(s) use this table" +
              (zoned.empty()
                   ? std::string()
                   : "; a Backstage node runs timeZone and dstPolicy tasks (" + zoned.front() +
                         (zoned.size() > 1 ? ", ..." : "") +
                         ") in its own zone: see docs/scheduler.md, \"Sharing tasks with Backstage\""));
    }
  }
  if (g.json) std::cout << Json{{"healthy", healthy}, {"checks", checks}}.dump(2) << "\n";
  return healthy ? 0 : kExitRefused;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"octop: command line for octopd and its database"};
  app.require_subcommand(1);
  Globals g;
  g.url = Env("OCTOP_URL", "http://127.0.0.1:7007");
  if (const char* t = std::getenv("OCTOP_TOKEN"); t != nullptr && *t != '\0') g.token = t;
  app.add_option("--url", g.url, "octopd's base URL (env OCTOP_URL)")->capture_default_str();
  app.add_option("--token", g.token, "bearer token, sent with every request (env OCTOP_TOKEN)");
  app.add_option("--database", g.database,
                 "database URL for migrate/doctor (sqlite:<dir> or postgresql://...)");
  app.add_option("-c,--config", g.config_path, "read database, URL, token and plugins from an octopd config");
  std::optional<std::string> division_mode;
  app.add_option("--plugin-division-mode", division_mode,
                 "PostgreSQL: a database per plugin (database, the default) or a schema per plugin (schema)")
      ->check(CLI::IsMember({"database", "schema"}));
  app.add_flag("--json", g.json, "machine-readable output");

  std::optional<std::string> plugin;
  auto* tasks = app.add_subcommand("tasks", "list every task of a running octopd");
  tasks->add_option("--plugin", plugin, "only this plugin");
  std::string p, id;
  auto* trigger = app.add_subcommand("trigger", "run a task now");
  trigger->add_option("plugin", p, "plugin id")->required();
  trigger->add_option("id", id, "task id")->required();
  auto* cancel = app.add_subcommand("cancel", "stop a task's current run");
  cancel->add_option("plugin", p, "plugin id")->required();
  cancel->add_option("id", id, "task id")->required();
  std::vector<std::string> plugins;
  auto* migrate = app.add_subcommand("migrate", "create or upgrade the tables (octop's and each plugin's)");
  migrate->add_option("--plugin", plugins, "plugin namespaces (default: the config's plugins)");
  auto* doctor = app.add_subcommand("doctor", "check the database, schema versions and clock skew");
  doctor->add_option("--plugin", plugins, "plugin namespaces (default: the config's plugins)");

  CronArgs cron_args;
  auto* cron = app.add_subcommand("cron", "cron expressions");
  cron->require_subcommand(1);
  auto* cron_next =
      cron->add_subcommand("next", "the next fire times of a cron expression, with their offsets");
  cron_next->add_option("expression", cron_args.expression, "e.g. '0 2 * * *' (5 or 6 fields)")->required();
  cron_next->add_option("--tz", cron_args.tz, "IANA time zone (default: this machine's)");
  cron_next->add_option("-n,--count", cron_args.count, "how many (1-1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cron_next->add_option("--after", cron_args.after,
                        "start after this instant, YYYY-MM-DDTHH:MM:SSZ (default now)");
  cron_next
      ->add_option("--dst-policy", cron_args.dst_policy,
                   "backstage, or <gap>,<overlap>: shift|skip, once|twice (docs/cron.md)")
      ->capture_default_str();
  cron_next->add_flag("--json", g.json, "machine-readable output");

  JobArgs job;
  auto* jobs = app.add_subcommand("jobs", "the job queue of a running octopd");
  jobs->require_subcommand(1);
  auto* jobs_enqueue = jobs->add_subcommand("enqueue", "add a job");
  jobs_enqueue->add_option("kind", job.kind, "job kind (the handler that runs it)")->required();
  jobs_enqueue->add_option("--payload", job.payload, "payload JSON, or - to read it from stdin")
      ->capture_default_str();
  jobs_enqueue->add_option("--queue", job.queue, "queue (default: default)");
  jobs_enqueue->add_option("--priority", job.priority, "lower runs first (default 0)");
  jobs_enqueue->add_option("--at", job.at, "not before this ISO 8601 instant, e.g. 2026-01-01T09:00:00Z");
  jobs_enqueue->add_option("--unique-key", job.unique_key, "at most one live job per key");
  jobs_enqueue->add_option("--max-retries", job.max_retries, "retries after the first attempt (default 3)");
  auto* jobs_list = jobs->add_subcommand("list", "list jobs, newest first");
  jobs_list->add_option("--status", job.status, "pending, running, success, failed or frozen");
  jobs_list->add_option("--queue", job.queue, "only this queue");
  jobs_list->add_option("--kind", job.filter_kind, "only this kind");
  jobs_list->add_option("--limit", job.limit, "at most this many (1..1000)")->capture_default_str();
  auto* jobs_summary = jobs->add_subcommand("summary", "counts by queue and status, latest failures");
  auto* jobs_retry = jobs->add_subcommand("retry", "run a failed or frozen job again now");
  jobs_retry->add_option("id", job.id, "job id")->required();
  auto* jobs_cancel = jobs->add_subcommand("cancel", "cancel a pending, failed or running job");
  jobs_cancel->add_option("id", job.id, "job id")->required();

  for (CLI::App* sub : {jobs_enqueue, jobs_list, jobs_summary, jobs_retry, jobs_cancel}) {
    sub->add_flag("--json", g.json, "machine-readable output");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // One line, so scripts can show it as is; CLI11's own output adds a second "Run with --help" line.
    std::cerr << "octop: " << e.what() << " (see octop --help)\n";
    return kExitUsage;
  }
  // A URL httplib cannot use would otherwise surface as "cannot reach" (exit 3) after a connection attempt.
  if (!(g.url.starts_with("http://") || g.url.starts_with("https://")) ||
      g.url.find_first_of(" \t\r\n") != std::string::npos ||
      g.url.size() <= std::string_view(g.url.starts_with("https://") ? "https://" : "http://").size()) {
    std::cerr << "octop: --url must be http://host[:port] or https://host[:port], got '"
              << g.url.substr(0, 200) << "'\n";
    return kExitUsage;
  }
  if (!g.config_path.empty()) {
    auto config = octop::daemon::LoadDaemonConfig(g.config_path);
    if (!config.ok()) {
      std::cerr << "octop: " << config.status().message() << "\n";
      return kExitUsage;
    }
    if (!g.database) g.database = config->database;
    g.division = config->plugin_division;
    g.pooling = config->pooling;
    if (!g.token) g.token = config->http.token;
    if (app.get_option("--url")->count() == 0 && std::getenv("OCTOP_URL") == nullptr) {
      const std::string host = config->http.host == "0.0.0.0" ? "127.0.0.1" : config->http.host;
      g.url = "http://" + host + ":" + std::to_string(config->http.port);
    }
  }
  if (division_mode) {
    g.division.mode = *division_mode == "schema" ? octop::PluginDivision::Mode::kSchema
                                                 : octop::PluginDivision::Mode::kDatabase;
  }
  try {
    if (*cron_next) return CronNext(g, cron_args);
    if (*tasks) return Tasks(g, plugin);
    if (*trigger) return Act(g, "trigger", p, id);
    if (*cancel) return Act(g, "cancel", p, id);
    if (*jobs_enqueue) return JobsEnqueue(g, job);
    if (*jobs_list) return JobsList(g, job);
    if (*jobs_summary) return JobsSummary(g);
    if (*jobs_retry) return JobsAct(g, "retry", job.id);
    if (*jobs_cancel) return JobsAct(g, "cancel", job.id);
    if (*migrate) return Migrate(g, plugins);
    if (*doctor) return Doctor(g, plugins);
  } catch (const nlohmann::json::exception& e) {
    // An answer of an unexpected shape (a field of another type): octopd is not what answered, or not a
    // version this CLI knows.
    std::cerr << "octop: unexpected answer from " << g.url << ": " << e.what() << "\n";
    return kExitUnreachable;
  }
  return kExitUsage;
}
