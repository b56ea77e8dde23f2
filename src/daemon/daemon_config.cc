#include "daemon/daemon_config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include <octop/json_depth.h>
#include <octop/task_settings.h>

#include "store/task_store.h"

namespace octop::daemon {

namespace {

using Json = nlohmann::json;

// JSON text of a value for an error message; invalid UTF-8 from the file is replaced, never a reason to
// throw.
std::string Show(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Converts YAML to JSON, remembering the line of every key path so errors can point into the file.
class YamlToJson {
 public:
  explicit YamlToJson(std::map<std::string, int>* lines) : lines_(lines) {}

  Result<Json> Convert(const YAML::Node& node, const std::string& path, std::size_t depth = 0) {
    // Aliases are expanded here, so a few hundred bytes of nested aliases ("billion laughs") would become
    // billions of nodes: the converted size and depth are bounded instead (docs/configuration.md).
    if (++nodes_ > kMaxNodes) {
      return InvalidArgumentError(Where(path) + "the configuration expands to more than " +
                                  std::to_string(kMaxNodes) + " values (nested aliases?)");
    }
    if (depth > kMaxJsonDepth) {
      return InvalidArgumentError(Where(path) + "nested deeper than " + std::to_string(kMaxJsonDepth) +
                                  " levels");
    }
    (*lines_)[path] = node.Mark().line + 1;
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return Json(nullptr);
      case YAML::NodeType::Scalar:
        return Scalar(node, path);
      case YAML::NodeType::Sequence: {
        Json out = Json::array();
        for (std::size_t i = 0; i < node.size(); ++i) {
          OCTOP_ASSIGN_OR_RETURN(Json item,
                                 Convert(node[i], path + "[" + std::to_string(i) + "]", depth + 1));
          out.push_back(std::move(item));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        Json out = Json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) return InvalidArgumentError(Where(path) + "keys must be plain strings");
          const std::string key = kv.first.Scalar();
          const std::string child = path.empty() ? key : path + "." + key;
          if (out.contains(key))
            return InvalidArgumentError(Where(child) + "key '" + key + "' appears twice");
          OCTOP_ASSIGN_OR_RETURN(Json value, Convert(kv.second, child, depth + 1));
          out[key] = std::move(value);
        }
        return out;
      }
    }
    return Json(nullptr);
  }

  std::string Where(const std::string& path) const {
    auto it = lines_->find(path);
    std::string out = it != lines_->end() ? "line " + std::to_string(it->second) + ": " : "";
    return out + (path.empty() ? "" : path + ": ");
  }

 private:
  static constexpr std::size_t kMaxNodes = 100000;
  std::size_t nodes_ = 0;

  // Plain scalars get YAML 1.2 core-schema types; quoted ones stay strings. ${NAME} is replaced in strings.
  Result<Json> Scalar(const YAML::Node& node, const std::string& path) {
    const std::string& text = node.Scalar();
    if (node.Tag() != "!") {
      if (text == "null" || text == "~" || text.empty()) return Json(nullptr);
      if (text == "true") return Json(true);
      if (text == "false") return Json(false);
      char* end = nullptr;
      errno = 0;
      long long as_int = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end != nullptr && *end == '\0' && end != text.c_str()) return Json(as_int);
      double as_double = std::strtod(text.c_str(), &end);
      if (end != nullptr && *end == '\0' && end != text.c_str() &&
          text.find_first_of("0123456789") != std::string::npos &&
          text.find_first_of("xXnN") == std::string::npos) {
        return Json(as_double);
      }
    }
    return ExpandEnv(text, path);
  }

  Result<Json> ExpandEnv(const std::string& text, const std::string& path) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      // `$${` is a literal `${`, so a shell command can keep its own expansions (docs/configuration.md).
      if (text.compare(i, 3, "$${") == 0) {
        out += "${";
        i += 2;
      } else if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
        std::size_t close = text.find('}', i + 2);
        if (close == std::string::npos)
          return InvalidArgumentError(Where(path) + "unterminated ${ in '" + text + "'");
        const std::string name = text.substr(i + 2, close - i - 2);
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) {
          return InvalidArgumentError(Where(path) + "environment variable " + name + " is not set");
        }
        out += value;
        i = close;
      } else {
        out += text[i];
      }
    }
    return Json(out);
  }

  std::map<std::string, int>* lines_;
};

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Reads one object of the config, tracking which keys were used so unknown ones are reported with a
// suggestion.
class Section {
 public:
  Section(const Json& json, std::string path, const YamlToJson& where)
      : json_(json), path_(std::move(path)), where_(where) {}

  const std::string& path() const { return path_; }
  std::string Child(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  std::string Where(std::string_view key) const { return where_.Where(Child(key)); }

  const Json* Get(std::string_view key) {
    known_.insert(std::string(key));
    auto it = json_.find(std::string(key));
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Result<std::optional<std::string>> OptionalString(std::string_view key) {
    const Json* v = Get(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return InvalidArgumentError(Where(key) + "expected a string, got " + Show(*v));
    return std::optional<std::string>(v->get<std::string>());
  }

  Result<std::optional<bool>> OptionalBool(std::string_view key) {
    const Json* v = Get(key);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return InvalidArgumentError(Where(key) + "expected true or false, got " + Show(*v));
    return std::optional<bool>(v->get<bool>());
  }

  Result<std::string> RequiredString(std::string_view key) {
    OCTOP_ASSIGN_OR_RETURN(auto v, OptionalString(key));
    if (!v || v->empty())
      return InvalidArgumentError(where_.Where(path_) + "missing required key '" + std::string(key) + "'");
    return *v;
  }

  Result<std::optional<std::int64_t>> OptionalInt(std::string_view key, std::int64_t min, std::int64_t max) {
    const Json* v = Get(key);
    if (v == nullptr) return std::optional<std::int64_t>();
    if (!v->is_number_integer() || v->get<std::int64_t>() < min || v->get<std::int64_t>() > max) {
      return InvalidArgumentError(Where(key) + "expected a whole number from " + std::to_string(min) +
                                  " to " + std::to_string(max) + ", got " + Show(*v));
    }
    return std::optional<std::int64_t>(v->get<std::int64_t>());
  }

  Result<std::map<std::string, std::string>> StringMap(std::string_view key) {
    std::map<std::string, std::string> out;
    const Json* v = Get(key);
    if (v == nullptr) return out;
    if (!v->is_object())
      return InvalidArgumentError(Where(key) + "expected a map of strings, got " + Show(*v));
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it->is_string()) {
        out[it.key()] = it->get<std::string>();
      } else if (it->is_number() || it->is_boolean()) {
        out[it.key()] = Show(*it);
      } else {
        return InvalidArgumentError(where_.Where(Child(key) + "." + it.key()) + "expected a string, got " +
                                    Show(*it));
      }
    }
    return out;
  }

  // Call after reading every known key: an unknown key is an error naming the closest known one.
  Status RejectUnknownKeys() const {
    if (!json_.is_object()) return Status::Ok();
    for (auto it = json_.begin(); it != json_.end(); ++it) {
      if (known_.contains(it.key())) continue;
      std::string best;
      std::size_t best_distance = std::numeric_limits<std::size_t>::max();
      for (const std::string& k : known_) {
        std::size_t d = EditDistance(it.key(), k);
        if (d < best_distance) {
          best_distance = d;
          best = k;
        }
      }
      std::string message = where_.Where(Child(it.key())) + "unknown key '" + it.key() + "'";
      if (!best.empty() && best_distance <= std::max<std::size_t>(2, it.key().size() / 3)) {
        message += "; did you mean '" + best + "'?";
      } else if (!known_.empty()) {
        std::string list;
        for (const std::string& k : known_) list += (list.empty() ? "" : ", ") + k;
        message += "; expected one of " + list;
      }
      return InvalidArgumentError(message);
    }
    return Status::Ok();
  }

 private:
  const Json& json_;
  std::string path_;
  const YamlToJson& where_;
  std::set<std::string> known_;
};

Status ExpectObject(const Json& json, const std::string& path, const YamlToJson& where) {
  if (json.is_object()) return Status::Ok();
  return InvalidArgumentError(where.Where(path) + "expected a map, got " + Show(json));
}

Result<Duration> ReadDuration(const Json& value, const std::string& path, const YamlToJson& where,
                              std::string_view source) {
  Result<Duration> d = Duration::ParseConfigValue(value, path, source);
  if (!d.ok()) return InvalidArgumentError(where.Where(path) + d.status().message());
  // Every duration in the file (grace periods and handler timeouts too) ends up added to a clock.
  if (!WithinMaxTaskDuration(*d)) {
    return InvalidArgumentError(where.Where(path) + Show(value) + " is longer than 100 years");
  }
  return d;
}

Result<ActionConfig> ReadAction(Section& owner, const YamlToJson& where) {
  const Json* command = owner.Get("command");
  const Json* webhook = owner.Get("webhook");
  if ((command == nullptr) == (webhook == nullptr)) {
    return InvalidArgumentError(where.Where(owner.path()) +
                                "needs exactly one action: 'command' or 'webhook'");
  }
  if (command != nullptr) {
    const std::string path = owner.Child("command");
    CommandAction action;
    // The short form is a list of arguments: command: [sh, -c, 'echo hi'].
    const Json* argv = command;
    std::optional<Section> section;
    if (command->is_object()) {
      section.emplace(*command, path, where);
      argv = section->Get("argv");
      if (argv == nullptr) return InvalidArgumentError(where.Where(path) + "missing required key 'argv'");
    }
    if (!argv->is_array() || argv->empty()) {
      return InvalidArgumentError(where.Where(path) + "argv must be a non-empty list of strings, got " +
                                  Show(*argv));
    }
    for (const Json& arg : *argv) {
      if (arg.is_string()) {
        action.argv.push_back(arg.get<std::string>());
      } else if (arg.is_number() || arg.is_boolean()) {
        action.argv.push_back(Show(arg));
      } else {
        return InvalidArgumentError(where.Where(path) + "argv entries must be strings, got " + Show(arg));
      }
    }
    if (section) {
      OCTOP_ASSIGN_OR_RETURN(action.env, section->StringMap("env"));
      OCTOP_ASSIGN_OR_RETURN(action.working_dir, section->OptionalString("workingDir"));
      if (const Json* grace = section->Get("killGrace")) {
        OCTOP_ASSIGN_OR_RETURN(Duration d,
                               ReadDuration(*grace, section->Child("killGrace"), where, "config"));
        action.kill_grace = std::chrono::duration_cast<std::chrono::milliseconds>(d.ToChrono());
      }
      OCTOP_RETURN_IF_ERROR(section->RejectUnknownKeys());
    }
    return ActionConfig(std::move(action));
  }
  const std::string path = owner.Child("webhook");
  OCTOP_RETURN_IF_ERROR(ExpectObject(*webhook, path, where));
  Section section(*webhook, path, where);
  WebhookAction action;
  OCTOP_ASSIGN_OR_RETURN(action.url, section.RequiredString("url"));
  if (!action.url.starts_with("http://") && !action.url.starts_with("https://")) {
    return InvalidArgumentError(section.Where("url") + "expected an http:// or https:// URL, got '" +
                                action.url + "'");
  }
  OCTOP_ASSIGN_OR_RETURN(auto method, section.OptionalString("method"));
  if (method) {
    std::string upper = *method;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    if (upper != "POST" && upper != "PUT" && upper != "GET") {
      return InvalidArgumentError(section.Where("method") + "expected POST, PUT or GET, got '" + *method +
                                  "'");
    }
    action.method = upper;
  }
  OCTOP_ASSIGN_OR_RETURN(action.headers, section.StringMap("headers"));
  OCTOP_RETURN_IF_ERROR(section.RejectUnknownKeys());
  return ActionConfig(std::move(action));
}

Result<ScheduleConfig> ReadSchedule(const Json& json, const std::string& path, const YamlToJson& where,
                                    std::string_view source) {
  OCTOP_RETURN_IF_ERROR(ExpectObject(json, path, where));
  Section s(json, path, where);
  ScheduleConfig out;
  const Json* frequency = s.Get("frequency");
  if (frequency == nullptr) {
    return InvalidArgumentError(where.Where(path) + "Missing required config value at '" +
                                s.Child("frequency") + "'");
  }
  const std::string fpath = s.Child("frequency");
  if (frequency->is_object() && frequency->contains("cron")) {
    Section f(*frequency, fpath, where);
    CronFrequency cron;
    OCTOP_ASSIGN_OR_RETURN(cron.cron, f.RequiredString("cron"));
    OCTOP_ASSIGN_OR_RETURN(cron.time_zone, f.OptionalString("timeZone"));
    OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> dst_policy, f.OptionalString("dstPolicy"));
    if (dst_policy) {
      Result<DstPolicy> policy = DstPolicy::Parse(*dst_policy);
      if (!policy.ok()) return InvalidArgumentError(f.Where("dstPolicy") + policy.status().message());
      cron.dst_policy = *policy;
    }
    OCTOP_RETURN_IF_ERROR(f.RejectUnknownKeys());
    out.frequency = std::move(cron);
  } else if (frequency->is_object() && frequency->contains("trigger")) {
    Section f(*frequency, fpath, where);
    OCTOP_ASSIGN_OR_RETURN(std::string trigger, f.RequiredString("trigger"));
    if (trigger != "manual") {
      return InvalidArgumentError(f.Where("trigger") + "Invalid trigger '" + trigger +
                                  "', expecting 'manual'");
    }
    OCTOP_RETURN_IF_ERROR(f.RejectUnknownKeys());
    out.frequency = ManualTrigger{};
  } else {
    OCTOP_ASSIGN_OR_RETURN(Duration d, ReadDuration(*frequency, fpath, where, source));
    out.frequency = d;
  }
  const Json* timeout = s.Get("timeout");
  if (timeout == nullptr) {
    return InvalidArgumentError(where.Where(path) + "Missing required config value at '" +
                                s.Child("timeout") + "'");
  }
  OCTOP_ASSIGN_OR_RETURN(out.timeout, ReadDuration(*timeout, s.Child("timeout"), where, source));
  if (const Json* delay = s.Get("initialDelay")) {
    OCTOP_ASSIGN_OR_RETURN(Duration d, ReadDuration(*delay, s.Child("initialDelay"), where, source));
    out.initial_delay = d;
  }
  if (const Json* scope = s.Get("scope")) {
    const std::string value = scope->is_string() ? scope->get<std::string>() : Show(*scope);
    if (value != "global" && value != "local") {
      return InvalidArgumentError(
          s.Where("scope") +
          "Only \"global\" or \"local\" are allowed for TaskScheduleDefinition.scope, but got: " + value);
    }
    out.scope = value;
  }
  OCTOP_RETURN_IF_ERROR(s.RejectUnknownKeys());
  return out;
}

Result<std::chrono::milliseconds> ReadMillis(Section& s, std::string_view key,
                                             std::chrono::milliseconds fallback, const YamlToJson& where) {
  const Json* v = s.Get(key);
  if (v == nullptr) return fallback;
  OCTOP_ASSIGN_OR_RETURN(Duration d, ReadDuration(*v, s.Child(key), where, "config"));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d.ToChrono());
  if (ms.count() <= 0) return InvalidArgumentError(s.Where(key) + "must be longer than zero");
  return ms;
}

bool IsValidPluginId(const std::string& id) {
  if (id.empty() || id.size() > 63) return false;
  if (!(id[0] >= 'a' && id[0] <= 'z')) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

}  // namespace

Result<ScheduleConfig> ReadScheduleConfig(const nlohmann::json& schedule, std::string_view key,
                                          std::string_view source) {
  std::map<std::string, int> no_lines;
  YamlToJson where(&no_lines);
  return ReadSchedule(schedule, std::string(key), where, source);
}

TaskScheduleDefinition ToScheduleDefinition(const ScheduleConfig& config) {
  TaskScheduleDefinition def;
  def.frequency = config.frequency;
  def.timeout = config.timeout;
  def.initial_delay = config.initial_delay;
  def.scope = config.scope == "local" ? TaskScope::kLocal : TaskScope::kGlobal;
  return def;
}

Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml_text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string(source) + ": not valid YAML: " + e.what());
  }
  std::map<std::string, int> lines;
  YamlToJson where(&lines);
  Result<Json> converted = where.Convert(root, "");
  if (!converted.ok()) return InvalidArgumentError(std::string(source) + ": " + converted.status().message());
  const Json& json = *converted;
  auto fail = [&](const Status& s) { return InvalidArgumentError(std::string(source) + ": " + s.message()); };
  if (json.is_null()) return DaemonConfig{};
  if (Status s = ExpectObject(json, "", where); !s.ok()) return fail(s);

  DaemonConfig config;
  Section top(json, "", where);
  auto read_all = [&]() -> Status {
    // `database` is the URL, or Backstage's shape: {connection, pluginDivisionMode, prefix, schemaPrefix}.
    if (const Json* db = top.Get("database"); db != nullptr && db->is_object()) {
      Section d(*db, "database", where);
      OCTOP_ASSIGN_OR_RETURN(config.database, d.RequiredString("connection"));
      OCTOP_ASSIGN_OR_RETURN(auto mode, d.OptionalString("pluginDivisionMode"));
      if (mode && *mode != "database" && *mode != "schema") {
        return InvalidArgumentError(d.Where("pluginDivisionMode") + "expected database or schema, got '" +
                                    *mode + "'");
      }
      if (mode) {
        config.plugin_division.mode =
            *mode == "schema" ? PluginDivision::Mode::kSchema : PluginDivision::Mode::kDatabase;
      }
      OCTOP_ASSIGN_OR_RETURN(auto prefix, d.OptionalString("prefix"));
      // As Backstage: an empty prefix means the default.
      if (prefix && !prefix->empty()) config.plugin_division.prefix = *prefix;
      OCTOP_ASSIGN_OR_RETURN(auto schema_prefix, d.OptionalString("schemaPrefix"));
      if (schema_prefix) {
        const bool identifier = std::regex_match(*schema_prefix, std::regex("[A-Za-z_][A-Za-z0-9_]*"));
        if (!schema_prefix->empty() && !identifier) {
          return InvalidArgumentError(
              d.Where("schemaPrefix") +
              "must start with a letter or underscore and hold only letters, digits and "
              "underscores, got '" +
              *schema_prefix + "'");
        }
        config.plugin_division.schema_prefix = *schema_prefix;
      }
      // Behind a pooler in transaction mode (docs/configuration.md, "Behind PgBouncer").
      OCTOP_ASSIGN_OR_RETURN(auto prepared, d.OptionalBool("preparedStatements"));
      if (prepared) config.pooling.prepared_statements = *prepared;
      OCTOP_ASSIGN_OR_RETURN(auto listen, d.OptionalString("listenConnection"));
      if (listen) {
        if (Result<store::DatabaseLocation> at = store::ParseDatabaseUrl(*listen);
            !at.ok() || at->backend != "postgres") {
          return InvalidArgumentError(d.Where("listenConnection") +
                                      "expected a postgresql:// URL (a direct connection for LISTEN)");
        }
        config.pooling.listen_url = *listen;
      }
      OCTOP_RETURN_IF_ERROR(d.RejectUnknownKeys());
    } else {
      OCTOP_ASSIGN_OR_RETURN(auto database, top.OptionalString("database"));
      if (database) config.database = *database;
    }
    // The URL's scheme, checked as the store will check it when it opens (the job queue's namespace).
    if (Status s = store::ValidateStoreNamespace(config.database, "octop"); !s.ok()) {
      return InvalidArgumentError(top.Where("database") + s.message());
    }
    OCTOP_ASSIGN_OR_RETURN(config.node_id, top.OptionalString("nodeId"));
    OCTOP_ASSIGN_OR_RETURN(auto level, top.OptionalString("logLevel"));
    if (level) {
      static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};
      if (!kLevels.contains(*level)) {
        return InvalidArgumentError(top.Where("logLevel") +
                                    "expected trace, debug, info, warn, error or off, got '" + *level + "'");
      }
      config.log_level = *level;
    }
    if (const Json* http = top.Get("http")) {
      OCTOP_RETURN_IF_ERROR(ExpectObject(*http, "http", where));
      Section h(*http, "http", where);
      OCTOP_ASSIGN_OR_RETURN(auto listen, h.OptionalString("listen"));
      if (listen) {
        const auto colon = listen->rfind(':');
        if (colon == std::string::npos || colon == 0) {
          return InvalidArgumentError(h.Where("listen") + "expected host:port, got '" + *listen + "'");
        }
        config.http.host = listen->substr(0, colon);
        if (config.http.host.size() > 2 && config.http.host.front() == '[' &&
            config.http.host.back() == ']') {
          config.http.host = config.http.host.substr(1, config.http.host.size() - 2);
        }
        const std::string port = listen->substr(colon + 1);
        char* end = nullptr;
        long value = std::strtol(port.c_str(), &end, 10);
        if (port.empty() || *end != '\0' || value < 0 || value > 65535) {
          return InvalidArgumentError(h.Where("listen") + "port must be 0-65535, got '" + port + "'");
        }
        config.http.port = static_cast<int>(value);
      }
      OCTOP_ASSIGN_OR_RETURN(config.http.token, h.OptionalString("token"));
      if (config.http.token && config.http.token->size() < 16) {
        return InvalidArgumentError(h.Where("token") + "a bearer token must be at least 16 characters");
      }
      for (auto [key, flag] : {std::pair{"protectReads", &config.http.protect_reads},
                               std::pair{"protectMetrics", &config.http.protect_metrics}}) {
        OCTOP_ASSIGN_OR_RETURN(auto value, h.OptionalBool(key));
        if (value) *flag = *value;
        if (*flag && !config.http.token) {
          return InvalidArgumentError(h.Where(key) + "needs http.token: there is no token to ask for");
        }
      }
      if (const Json* hosts = h.Get("allowedHosts")) {
        if (!hosts->is_array()) {
          return InvalidArgumentError(h.Where("allowedHosts") + "expected a list of host names, got " +
                                      Show(*hosts));
        }
        for (const Json& host : *hosts) {
          if (!host.is_string() || host.get<std::string>().empty() ||
              host.get<std::string>().find_first_of(":/ ") != std::string::npos) {
            return InvalidArgumentError(h.Where("allowedHosts") +
                                        "expected host names without port or scheme, got " + Show(host));
          }
          config.http.allowed_hosts.push_back(host.get<std::string>());
        }
      }
      OCTOP_RETURN_IF_ERROR(h.RejectUnknownKeys());
    }
    if (const Json* scheduler = top.Get("scheduler")) {
      OCTOP_RETURN_IF_ERROR(ExpectObject(*scheduler, "scheduler", where));
      Section s(*scheduler, "scheduler", where);
      OCTOP_ASSIGN_OR_RETURN(config.work_check_frequency,
                             ReadMillis(s, "workCheckFrequency", config.work_check_frequency, where));
      OCTOP_ASSIGN_OR_RETURN(config.janitor_interval,
                             ReadMillis(s, "janitorInterval", config.janitor_interval, where));
      OCTOP_RETURN_IF_ERROR(s.RejectUnknownKeys());
    }
    if (const Json* plugins = top.Get("plugins")) {
      OCTOP_RETURN_IF_ERROR(ExpectObject(*plugins, "plugins", where));
      for (auto it = plugins->begin(); it != plugins->end(); ++it) {
        const std::string ppath = "plugins." + it.key();
        if (!IsValidPluginId(it.key())) {
          return InvalidArgumentError(
              where.Where(ppath) + "plugin id '" + it.key() +
              "' must be 1-63 characters of a-z, 0-9, '-' or '_', starting with a letter");
        }
        OCTOP_RETURN_IF_ERROR(ExpectObject(*it, ppath, where));
        Section p(*it, ppath, where);
        PluginConfig plugin{.id = it.key()};
        if (const Json* tasks = p.Get("tasks")) {
          if (!tasks->is_array()) return InvalidArgumentError(p.Where("tasks") + "expected a list of tasks");
          std::set<std::string> ids;
          for (std::size_t i = 0; i < tasks->size(); ++i) {
            const std::string tpath = ppath + ".tasks[" + std::to_string(i) + "]";
            OCTOP_RETURN_IF_ERROR(ExpectObject((*tasks)[i], tpath, where));
            Section t((*tasks)[i], tpath, where);
            TaskConfig task;
            OCTOP_ASSIGN_OR_RETURN(task.id, t.RequiredString("id"));
            if (!ids.insert(task.id).second) {
              return InvalidArgumentError(t.Where("id") + "task id '" + task.id +
                                          "' is used twice in plugin " + plugin.id);
            }
            const Json* schedule = t.Get("schedule");
            if (schedule == nullptr)
              return InvalidArgumentError(where.Where(tpath) + "missing required key 'schedule'");
            OCTOP_ASSIGN_OR_RETURN(task.schedule,
                                   ReadSchedule(*schedule, t.Child("schedule"), where, source));
            OCTOP_ASSIGN_OR_RETURN(task.action, ReadAction(t, where));
            OCTOP_RETURN_IF_ERROR(t.RejectUnknownKeys());
            // What ScheduleTask would refuse at start, refused here (and so by --check) with the key path.
            if (Status s = store::ValidateTaskId(task.id); !s.ok()) {
              return InvalidArgumentError(t.Where("id") + s.message());
            }
            if (auto settings = TaskSettingsFromSchedule(ToScheduleDefinition(task.schedule));
                !settings.ok()) {
              return InvalidArgumentError(t.Where("schedule") + settings.status().message());
            }
            plugin.tasks.push_back(std::move(task));
          }
        }
        OCTOP_RETURN_IF_ERROR(p.RejectUnknownKeys());
        // The plugin's database or schema name, as the store will place it.
        if (Status s = store::ValidateStoreNamespace(config.database, plugin.id, config.plugin_division);
            !s.ok()) {
          return InvalidArgumentError(where.Where(ppath) + s.message());
        }
        config.plugins.push_back(std::move(plugin));
      }
    }
    if (const Json* jobs = top.Get("jobs")) {
      OCTOP_RETURN_IF_ERROR(ExpectObject(*jobs, "jobs", where));
      Section j(*jobs, "jobs", where);
      OCTOP_ASSIGN_OR_RETURN(auto prefetch, j.OptionalInt("prefetch", 0, 1000));
      if (prefetch) config.job_prefetch = static_cast<int>(*prefetch);
      if (const Json* wake = j.Get("wakeClaimInterval")) {
        OCTOP_ASSIGN_OR_RETURN(Duration d,
                               ReadDuration(*wake, j.Child("wakeClaimInterval"), where, "config"));
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d.ToChrono());
        if (ms.count() < 0 || ms > std::chrono::milliseconds(100)) {
          return InvalidArgumentError(j.Where("wakeClaimInterval") + "must be from 0 to 100 ms, got " +
                                      std::to_string(ms.count()) + " ms");
        }
        config.job_wake_claim_interval = ms;
      }
      OCTOP_ASSIGN_OR_RETURN(config.job_rescue_interval,
                             ReadMillis(j, "rescueInterval", config.job_rescue_interval, where));
      OCTOP_ASSIGN_OR_RETURN(config.job_reconcile_interval,
                             ReadMillis(j, "reconcileInterval", config.job_reconcile_interval, where));
      if (const Json* handlers = j.Get("handlers")) {
        if (!handlers->is_array())
          return InvalidArgumentError(j.Where("handlers") + "expected a list of handlers");
        std::set<std::string> kinds;
        for (std::size_t i = 0; i < handlers->size(); ++i) {
          const std::string hpath = "jobs.handlers[" + std::to_string(i) + "]";
          OCTOP_RETURN_IF_ERROR(ExpectObject((*handlers)[i], hpath, where));
          Section h((*handlers)[i], hpath, where);
          JobHandlerConfig handler;
          OCTOP_ASSIGN_OR_RETURN(handler.kind, h.RequiredString("kind"));
          if (!kinds.insert(handler.kind).second) {
            return InvalidArgumentError(h.Where("kind") + "job kind '" + handler.kind + "' has two handlers");
          }
          OCTOP_ASSIGN_OR_RETURN(auto queue, h.OptionalString("queue"));
          if (queue) handler.queue = *queue;
          OCTOP_ASSIGN_OR_RETURN(auto concurrency, h.OptionalInt("concurrency", 1, 1024));
          if (concurrency) handler.concurrency = static_cast<int>(*concurrency);
          if (const Json* timeout = h.Get("timeout")) {
            OCTOP_ASSIGN_OR_RETURN(Duration d, ReadDuration(*timeout, h.Child("timeout"), where, source));
            handler.timeout = d;
          }
          OCTOP_ASSIGN_OR_RETURN(handler.action, ReadAction(h, where));
          OCTOP_RETURN_IF_ERROR(h.RejectUnknownKeys());
          config.job_handlers.push_back(std::move(handler));
        }
      }
      OCTOP_RETURN_IF_ERROR(j.RejectUnknownKeys());
    }
    return top.RejectUnknownKeys();
  };
  if (Status s = read_all(); !s.ok()) return fail(s);
  return config;
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("config file '" + path + "' is a directory");
  }
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read config file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseDaemonConfig(buffer.str(), path);
}

}  // namespace octop::daemon
