#include "daemon/daemon.h"

#include <ctime>
#include <stdexcept>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/command_runner.h"
#include "http/api_server.h"
#include "http/job_routes.h"
#include "store/job_store.h"

namespace octop::daemon {

namespace {

std::optional<std::string> ShimOrNone(const std::string& exec_shim) {
  return exec_shim.empty() ? std::nullopt : std::optional<std::string>(exec_shim);
}

TaskFunction CommandFunction(const CommandAction& action, std::string plugin_id, std::string task_id,
                             std::string exec_shim) {
  return [action, plugin_id, task_id, exec_shim](std::stop_token stop) {
    CommandSpec spec{.argv = action.argv,
                     .env = action.env,
                     .working_dir = action.working_dir,
                     .stdin_data = std::nullopt,
                     .kill_grace = action.kill_grace,
                     .exec_shim = ShimOrNone(exec_shim)};
    spec.env["OCTOP_PLUGIN_ID"] = plugin_id;
    spec.env["OCTOP_TASK_ID"] = task_id;
    const std::string prefix = plugin_id + "/" + task_id;
    Result<CommandOutcome> outcome = RunCommand(spec, stop, [&prefix](Stream stream, std::string_view line) {
      if (stream == Stream::kStdout) {
        spdlog::info("[{}] {}", prefix, line);
      } else {
        spdlog::warn("[{}] {}", prefix, line);
      }
    });
    if (!outcome.ok()) throw std::runtime_error(outcome.status().message());
    if (!outcome->succeeded()) throw std::runtime_error("command " + outcome->Describe());
  };
}

// Splits http(s)://host[:port]/path into the scheme+authority httplib's client takes and the path.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const auto scheme_end = url.find("://");
  const auto path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  if (path_start == std::string::npos) return {url, "/"};
  return {url.substr(0, path_start), url.substr(path_start)};
}

TaskFunction WebhookFunction(const WebhookAction& action, std::string plugin_id, std::string task_id) {
  return [action, plugin_id, task_id](std::stop_token stop) {
    auto [base, path] = SplitUrl(action.url);
    httplib::Client client(base);
    client.set_connection_timeout(10, 0);
    client.set_read_timeout(3600, 0);  // the task's timeout ends the call through stop()
    std::stop_callback on_stop(stop, [&client] { client.stop(); });
    httplib::Headers headers(action.headers.begin(), action.headers.end());
    const std::string body = nlohmann::json{{"pluginId", plugin_id}, {"taskId", task_id}}.dump();
    httplib::Result result = action.method == "GET"   ? client.Get(path, headers)
                             : action.method == "PUT" ? client.Put(path, headers, body, "application/json")
                                                      : client.Post(path, headers, body, "application/json");
    if (stop.stop_requested()) throw std::runtime_error("webhook " + action.url + " stopped");
    if (!result)
      throw std::runtime_error("webhook " + action.url + " failed: " + httplib::to_string(result.error()));
    if (result->status < 200 || result->status > 299) {
      std::string snippet = result->body.substr(0, 512);
      throw std::runtime_error("webhook " + action.url + " answered " + std::to_string(result->status) +
                               (snippet.empty() ? "" : ": " + snippet));
    }
  };
}

// EX_TEMPFAIL (sysexits.h): "try again later".
constexpr int kExitTempFail = 75;

JobHandler CommandJobHandler(const CommandAction& action, std::string kind, std::string exec_shim) {
  return [action, kind, exec_shim](const JobContext& job) -> JobResult {
    CommandSpec spec{.argv = action.argv,
                     .env = action.env,
                     .working_dir = action.working_dir,
                     .stdin_data = job.payload,
                     .kill_grace = action.kill_grace,
                     .exec_shim = ShimOrNone(exec_shim)};
    spec.env["OCTOP_JOB_ID"] = job.id;
    spec.env["OCTOP_JOB_KIND"] = job.kind;
    spec.env["OCTOP_JOB_QUEUE"] = job.queue;
    spec.env["OCTOP_JOB_ATTEMPT"] = std::to_string(job.attempt);
    spec.env["OCTOP_JOB_MAX_RETRIES"] = std::to_string(job.max_retries);
    const std::string prefix = "job " + kind + "/" + job.id;
    Result<CommandOutcome> outcome =
        RunCommand(spec, job.stop_token, [&prefix](Stream stream, std::string_view line) {
          if (stream == Stream::kStdout) {
            spdlog::info("[{}] {}", prefix, line);
          } else {
            spdlog::warn("[{}] {}", prefix, line);
          }
        });
    if (!outcome.ok()) return JobResult::Fail(outcome.status().message());
    if (outcome->succeeded()) return JobResult::Done();
    if (!outcome->stopped && outcome->exit_code == kExitTempFail) {
      return JobResult::Retry(std::nullopt, "command " + outcome->Describe());
    }
    return JobResult::Fail("command " + outcome->Describe());
  };
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::string& value, WallTime now) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  if (value.empty()) return std::nullopt;
  const seconds limit = std::chrono::duration_cast<seconds>(kMaxJobRetryAfter);
  if (value.find_first_not_of("0123456789") == std::string::npos) {
    // Any number of digits: more than the limit's worth is the limit, never an overflow.
    const std::string digits = value.substr(std::min(value.find_first_not_of('0'), value.size()));
    if (digits.size() > 9) return milliseconds(limit);
    return milliseconds(std::min(seconds(digits.empty() ? 0 : std::stol(digits)), limit));
  }
  std::tm tm{};
  const char* end = ::strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  // Compared in seconds since the epoch, which hold any year strptime reads; WallTime (nanoseconds) would
  // overflow past 2262.
  const std::int64_t at = static_cast<std::int64_t>(::timegm(&tm));
  const std::int64_t now_s = std::chrono::floor<seconds>(now.time_since_epoch()).count();
  const std::int64_t delay = std::clamp<std::int64_t>(at - now_s, 0, limit.count());
  return milliseconds(seconds(delay));
}

namespace {

JobHandler WebhookJobHandler(const WebhookAction& action, std::string kind) {
  return [action, kind](const JobContext& job) -> JobResult {
    auto [base, path] = SplitUrl(action.url);
    httplib::Client client(base);
    client.set_connection_timeout(10, 0);
    client.set_read_timeout(3600, 0);  // the job's timeout ends the call through stop()
    std::stop_callback on_stop(job.stop_token, [&client] { client.stop(); });
    httplib::Headers headers(action.headers.begin(), action.headers.end());
    headers.emplace("X-Octop-Job-Id", job.id);
    headers.emplace("X-Octop-Job-Kind", job.kind);
    headers.emplace("X-Octop-Job-Attempt", std::to_string(job.attempt));
    httplib::Result result = action.method == "PUT"
                                 ? client.Put(path, headers, job.payload, "application/json")
                                 : client.Post(path, headers, job.payload, "application/json");
    if (job.stop_token.stop_requested()) return JobResult::Fail("webhook " + action.url + " stopped");
    if (!result) {
      return JobResult::Fail("webhook " + action.url + " failed: " + httplib::to_string(result.error()));
    }
    if (result->status >= 200 && result->status <= 299) return JobResult::Done();
    std::string message = "webhook " + action.url + " answered " + std::to_string(result->status);
    const std::string snippet = result->body.substr(0, 512);
    if (!snippet.empty()) message += ": " + snippet;
    if (result->status == 429 || result->status == 503) {
      return JobResult::Retry(
          ParseRetryAfter(result->get_header_value("Retry-After"), Clock::Real().WallNow()), message);
    }
    return JobResult::Fail(message);
  };
}

}  // namespace

JobHandler MakeJobHandler(const ActionConfig& action, std::string kind, const std::string& exec_shim) {
  if (const auto* command = std::get_if<CommandAction>(&action)) {
    return CommandJobHandler(*command, std::move(kind), exec_shim);
  }
  return WebhookJobHandler(std::get<WebhookAction>(action), std::move(kind));
}

TaskFunction MakeTaskFunction(const ActionConfig& action, std::string plugin_id, std::string task_id,
                              const std::string& exec_shim) {
  if (const auto* command = std::get_if<CommandAction>(&action)) {
    return CommandFunction(*command, std::move(plugin_id), std::move(task_id), exec_shim);
  }
  return WebhookFunction(std::get<WebhookAction>(action), std::move(plugin_id), std::move(task_id));
}

Daemon::Daemon(DaemonConfig config, std::string web_root, std::string exec_shim)
    : config_(std::move(config)), web_root_(std::move(web_root)), exec_shim_(std::move(exec_shim)) {}

Daemon::~Daemon() { Stop(); }

Status Daemon::Start() {
  SchedulerOptions options;
  options.database_url = config_.database;
  options.plugin_division = config_.plugin_division;
  options.pooling = config_.pooling;
  options.work_check_frequency = config_.work_check_frequency;
  options.janitor_interval = config_.janitor_interval;
  scheduler_ = std::make_unique<Scheduler>(std::move(options));
  for (const PluginConfig& plugin : config_.plugins) {
    PluginScheduler& p = scheduler_->ForPlugin(plugin.id);
    for (const TaskConfig& task : plugin.tasks) {
      TaskDefinition def =
          TaskDefinition::Of(ToScheduleDefinition(task.schedule),
                             {.id = task.id,
                              .fn = MakeTaskFunction(task.action, plugin.id, task.id, exec_shim_),
                              .signal = std::nullopt});
      if (Status s = p.ScheduleTask(std::move(def)); !s.ok()) {
        Stop();
        return Status(s.code(), "plugins." + plugin.id + " task '" + task.id + "': " + s.message());
      }
    }
  }
  JobQueueOptions job_options;
  job_options.database_url = config_.database;
  job_options.pooling = config_.pooling;
  job_options.prefetch = config_.job_prefetch;
  job_options.wake_claim_interval = config_.job_wake_claim_interval;
  job_options.rescue_interval = config_.job_rescue_interval;
  job_options.reconcile_interval = config_.job_reconcile_interval;
  if (config_.node_id) job_options.worker_id = *config_.node_id;
  auto jobs = JobQueue::Open(std::move(job_options));
  if (!jobs.ok()) {
    Stop();
    return Status(jobs.status().code(), "job queue on " + store::RedactDatabaseUrl(config_.database) + ": " +
                                            jobs.status().message());
  }
  jobs_ = std::move(jobs).value();
  for (std::size_t i = 0; i < config_.job_handlers.size(); ++i) {
    const JobHandlerConfig& h = config_.job_handlers[i];
    JobHandlerOptions handler_options;
    if (h.timeout)
      handler_options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(h.timeout->ToChrono());
    Status s = jobs_->RegisterHandler(h.kind, MakeJobHandler(h.action, h.kind, exec_shim_), handler_options);
    if (s.ok()) s = jobs_->AddWorkers(h.queue, h.concurrency);
    if (!s.ok()) {
      Stop();
      return Status(s.code(),
                    "jobs.handlers[" + std::to_string(i) + "] (kind '" + h.kind + "'): " + s.message());
    }
  }
  if (Status s = jobs_->Start(); !s.ok()) {
    Stop();
    return s;
  }

  http::ApiServerOptions http_options;
  http_options.host = config_.http.host;
  http_options.port = config_.http.port;
  http_options.token = config_.http.token;
  http_options.protect_reads = config_.http.protect_reads;
  http_options.protect_metrics = config_.http.protect_metrics;
  http_options.allowed_hosts = config_.http.allowed_hosts;
  http_options.web_root = web_root_;
  http_options.warn = [](std::string_view message) { spdlog::warn("{}", message); };
  // One connection kept for the readiness probe, opened now so an unreachable database fails the start.
  auto probe = store::OpenJobStore(config_.database, {.ns = "octop", .pooling = config_.pooling});
  if (!probe.ok()) {
    Stop();
    return Status(probe.status().code(),
                  "database " + store::RedactDatabaseUrl(config_.database) + ": " + probe.status().message());
  }
  std::shared_ptr<store::JobStore> probe_store = std::move(probe).value();
  // Ready means able to work: the database answers and takes writes (a standby, a read-only file or a full
  // disk answer reads but fail every claim).
  http_options.readiness = [probe_store]() -> Status { return probe_store->CheckWritable(); };
  http_options.extra_registries.push_back(jobs_->metrics_registry());
  server_ = std::make_unique<http::ApiServer>(*scheduler_, std::move(http_options));
  http::AddJobRoutes(*server_, *jobs_);
  if (Status s = server_->Start(); !s.ok()) {
    Stop();
    return s;
  }
  spdlog::info("octopd listening on http://{}:{} (database {})", config_.http.host, server_->port(),
               store::RedactDatabaseUrl(config_.database));
  return Status::Ok();
}

void Daemon::Stop() {
  if (server_) server_->Stop();
  if (jobs_) jobs_->Shutdown();
  if (scheduler_) scheduler_->Shutdown();
  server_.reset();
  jobs_.reset();
  scheduler_.reset();
}

int Daemon::http_port() const { return server_ ? server_->port() : 0; }

}  // namespace octop::daemon
