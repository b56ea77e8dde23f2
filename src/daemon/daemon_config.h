// DaemonConfig: octopd's YAML configuration, read and fully validated before anything starts.
//
// The file names the database, the HTTP listener, and per plugin the tasks to schedule, each with a schedule
// read exactly as Backstage's readSchedulerServiceTaskScheduleDefinitionFromConfig reads one (frequency as
// {cron: ...}, {trigger: manual}, a duration string or a duration object; timeout; initialDelay; scope) and
// an action: a command or a webhook. Job handlers (per job kind) take the same two action forms.
//
// Every error names the key path and the offending value ("plugins.demo.tasks[1].schedule.frequency: ...");
// unknown keys are errors with a suggestion of the nearest known key. `${NAME}` in a string value is replaced
// by the environment variable NAME (an unset variable is an error), so secrets such as the bearer token stay
// out of the file.
//
// Thread-safety: plain values, built once at start-up.
#ifndef OCTOP_DAEMON_DAEMON_CONFIG_H_
#define OCTOP_DAEMON_DAEMON_CONFIG_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include <octop/duration.h>
#include <octop/postgres_pooling.h>
#include <octop/scheduler.h>
#include <octop/status.h>

namespace octop::daemon {

// One schedule, as Backstage's config reader returns it.
struct ScheduleConfig {
  // {cron, timeZone?, dstPolicy?} (timeZone and dstPolicy are octop's extensions), a duration, or
  // {trigger: manual}.
  TaskFrequency frequency;
  Duration timeout;
  std::optional<Duration> initial_delay;
  std::optional<std::string> scope;  // "global" or "local" when given
};

// Run a program. argv[0] is looked up in PATH. stdout/stderr go to the log, line by line. On timeout or
// cancel the process group gets SIGTERM, then SIGKILL after kill_grace.
struct CommandAction {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to octopd's environment
  std::optional<std::string> working_dir;
  std::chrono::milliseconds kill_grace{5000};
};

// Call a URL. A 2xx answer is success; anything else (or no answer before the timeout) is a failed run.
struct WebhookAction {
  std::string url;
  std::string method = "POST";
  std::map<std::string, std::string> headers;
};

using ActionConfig = std::variant<CommandAction, WebhookAction>;

struct TaskConfig {
  std::string id;
  ScheduleConfig schedule;
  ActionConfig action;
};

struct PluginConfig {
  std::string id;
  std::vector<TaskConfig> tasks;
};

struct JobHandlerConfig {
  std::string kind;
  std::string queue = "default";
  int concurrency = 4;
  std::optional<Duration> timeout;
  ActionConfig action;  // a command gets the job's payload JSON on stdin
};

struct HttpConfig {
  std::string host = "127.0.0.1";
  int port = 7007;
  std::optional<std::string> token;  // bearer token required for POST when set
  bool protect_reads = false;        // http.protectReads: API GETs need the token too
  bool protect_metrics = false;      // http.protectMetrics: /metrics needs the token
  // http.allowedHosts: names a Host header may carry besides IP literals and localhost (ApiServerOptions).
  std::vector<std::string> allowed_hosts;
};

struct DaemonConfig {
  std::string database = "sqlite:octop-data";
  // database.pluginDivisionMode / prefix / schemaPrefix (PostgreSQL only).
  PluginDivision plugin_division;
  // database.preparedStatements / listenConnection (PostgreSQL behind a pooler in transaction mode).
  PostgresPooling pooling;
  HttpConfig http;
  std::optional<std::string> node_id;  // default: hostname-pid
  std::chrono::milliseconds work_check_frequency{5000};
  std::chrono::milliseconds janitor_interval{60000};
  std::vector<PluginConfig> plugins;
  std::vector<JobHandlerConfig> job_handlers;
  int job_prefetch = 0;  // jobs.prefetch: JobQueueOptions::prefetch, 0..1000
  // jobs.wakeClaimInterval: JobQueueOptions::wake_claim_interval, 0..100 ms (whole milliseconds).
  std::chrono::milliseconds job_wake_claim_interval{1};
  // jobs.rescueInterval: JobQueueOptions::rescue_interval, how often expired running jobs are put back.
  std::chrono::milliseconds job_rescue_interval{15000};
  // jobs.reconcileInterval: JobQueueOptions::reconcile_interval, the period of the reconcile pass that runs
  // without a notification of jobs written by SQL.
  std::chrono::milliseconds job_reconcile_interval{std::chrono::minutes(5)};
  std::string log_level = "info";
};

// The runtime's schedule for a config schedule (scope defaults to global).
TaskScheduleDefinition ToScheduleDefinition(const ScheduleConfig& config);

// Parses YAML text; `source` names it in messages (e.g. the file path). Each task is also checked as
// PluginScheduler::ScheduleTask checks it (id, cron, time zone, durations), so `octopd --check` refuses
// exactly what a start would.
Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml_text, std::string_view source);
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

// Backstage's readSchedulerServiceTaskScheduleDefinitionFromConfig on a JSON view of a schedule object; `key`
// is the path of that object used in messages ("" for the top level); `source` names the config (Backstage's
// context).
Result<ScheduleConfig> ReadScheduleConfig(const nlohmann::json& schedule, std::string_view key,
                                          std::string_view source);

}  // namespace octop::daemon

#endif  // OCTOP_DAEMON_DAEMON_CONFIG_H_
