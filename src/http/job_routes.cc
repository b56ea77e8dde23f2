#include "http/job_routes.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <memory>

#include <date/date.h>
#include <nlohmann/json.hpp>

#include <octop/duration.h>
#include <octop/json_depth.h>

#include "core/json_text.h"
#include "http/task_json.h"
#include "store/job_rules.h"

namespace octop::http {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kMaxNameBytes = 255;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool ReadDigits(std::string_view s, std::size_t& pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  pos += n;
  return true;
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

// Why nlohmann::json refuses `text` ("parse error at line 1, column 9: syntax error ..."), without its
// exception id and cut to a few hundred bytes: a client sees where its body went wrong. Only on the error
// path.
std::string JsonErrorReason(std::string_view text) {
  std::string reason = "unknown reason";
  try {
    const Json unused = Json::parse(text);
  } catch (const Json::exception& e) {
    reason = e.what();
    if (reason.starts_with("[json.exception.")) {
      const std::size_t end = reason.find("] ");
      if (end != std::string::npos) reason.erase(0, end + 2);
    }
  }
  constexpr std::size_t kMaxReasonBytes = 300;
  if (reason.size() > kMaxReasonBytes) reason = reason.substr(0, kMaxReasonBytes) + "...";
  return reason;
}

Result<std::string> NameField(const Json& body, const char* field, bool required, std::string fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (required) return InvalidArgumentError(std::string("'") + field + "' is required");
    return fallback;
  }
  if (!it->is_string()) return InvalidArgumentError(std::string("'") + field + "' must be a string");
  std::string value = it->get<std::string>();
  if (value.empty()) return InvalidArgumentError(std::string("'") + field + "' must not be empty");
  if (value.find('\0') != std::string::npos) {
    return InvalidArgumentError(std::string("'") + field + "' must not contain the character U+0000");
  }
  if (value.size() > kMaxNameBytes) {
    return InvalidArgumentError(std::string("'") + field + "' is longer than " +
                                std::to_string(kMaxNameBytes) + " bytes");
  }
  return value;
}

Result<std::optional<int>> IntField(const Json& body, const char* field, long long min, long long max) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<int>();
  if (!it->is_number_integer()) {
    return InvalidArgumentError(std::string("'") + field + "' must be an integer, got " + Dump(*it));
  }
  const long long v =
      it->is_number_unsigned() && it->get<unsigned long long>() > static_cast<unsigned long long>(max)
          ? max + 1
          : it->get<long long>();
  if (v < min || v > max) {
    return InvalidArgumentError(std::string("'") + field + "' must be between " + std::to_string(min) +
                                " and " + std::to_string(max) + ", got " + Dump(*it));
  }
  return std::optional<int>(static_cast<int>(v));
}

// A query parameter; nullopt when absent or empty, InvalidArgument when it does not decode.
Result<std::optional<std::string>> NameQuery(const ApiRequest& req, const char* name) {
  OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> v, req.Query(name));
  if (!v || v->empty()) return std::optional<std::string>();
  return v;
}

// A duration query parameter ("1h", "60s", "PT1H"): the ms grammar of the config files.
Result<std::chrono::microseconds> DurationQuery(const ApiRequest& req, const char* name,
                                                std::chrono::microseconds fallback) {
  OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> v, NameQuery(req, name));
  if (!v) return fallback;
  Result<Duration> d = Duration::ParseConfigString(*v);
  if (!d.ok()) {
    return InvalidArgumentError(std::string("'") + name +
                                "' must be a duration such as 1h, 60s or PT1H, got '" + *v + "'");
  }
  return d->ToChrono();
}

Json Millis(const std::optional<std::chrono::microseconds>& d) {
  if (!d) return Json();
  return Json(static_cast<double>(d->count()) / 1000.0);
}

Result<ApiResponse> JobResponse(JobQueue& queue, const std::string& id) {
  OCTOP_ASSIGN_OR_RETURN(JobInfo job, queue.GetJob(id));
  return ApiResponse::Json(JobJsonText(job));
}

}  // namespace

std::optional<WallTime> ParseIsoInstant(std::string_view s) {
  std::size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ReadDigits(s, pos, 4, year) || !Expect(s, pos, '-') || !ReadDigits(s, pos, 2, month) ||
      !Expect(s, pos, '-') || !ReadDigits(s, pos, 2, day)) {
    return std::nullopt;
  }
  if (pos >= s.size() || (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ')) return std::nullopt;
  ++pos;
  if (!ReadDigits(s, pos, 2, hour) || !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, minute))
    return std::nullopt;
  if (pos < s.size() && s[pos] == ':' && !(++pos, ReadDigits(s, pos, 2, second))) return std::nullopt;
  std::chrono::nanoseconds fraction{0};
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    std::int64_t scale = 100000000;
    std::int64_t ns = 0;
    const std::size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])) != 0) {
      ns += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
    fraction = std::chrono::nanoseconds(ns);
  }
  std::chrono::minutes offset{0};
  if (pos >= s.size()) return std::nullopt;  // an offset is required: a bare local time is ambiguous
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    const bool negative = s[pos] == '-';
    ++pos;
    int oh = 0, om = 0;
    if (!ReadDigits(s, pos, 2, oh)) return std::nullopt;
    if (pos < s.size()) {
      if (s[pos] == ':') ++pos;
      if (!ReadDigits(s, pos, 2, om)) return std::nullopt;
    }
    if (oh > 23 || om > 59) return std::nullopt;
    offset = std::chrono::minutes(oh * 60 + om);
    if (negative) offset = -offset;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  const date::year_month_day ymd{date::year(year), date::month(static_cast<unsigned>(month)),
                                 date::day(static_cast<unsigned>(day))};
  // WallTime counts nanoseconds in 64 bits: years beyond 2262 do not fit, so the accepted range is bounded.
  if (!ymd.ok() || year < 1970 || year > 2200 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  const auto tp = date::sys_days(ymd) + std::chrono::hours(hour) + std::chrono::minutes(minute) +
                  std::chrono::seconds(second) - offset;
  return std::chrono::time_point_cast<WallTime::duration>(tp) +
         std::chrono::duration_cast<WallTime::duration>(fraction);
}

std::string JobJsonText(const JobInfo& job) {
  // The payload is spliced in as stored (JSON text the store validated), not parsed and dumped again: a
  // number beyond a double's precision comes back as it went in (core/json_text.h, docs/jobs.md "Payloads").
  Json head{{"id", job.id}, {"queue", job.queue}, {"kind", job.kind}};
  Json tail;
  std::string payload = "null";
  if (job.omitted_payload_bytes) {
    // Left out of a listing for its byte budget: GET /jobs/<id> has it.
    tail["payloadOmittedBytes"] = *job.omitted_payload_bytes;
  } else if (JsonDepthAllowed(job.payload) && Json::accept(job.payload)) {
    payload = text::CompactJson(job.payload);
  } else {
    // A payload stored before the depth bound existed is shown as its text.
    payload = Dump(Json(job.payload));
  }
  tail["priority"] = job.priority;
  tail["status"] = std::string(JobStatusName(job.status));
  tail["attempt"] = job.attempt;
  tail["maxRetries"] = job.max_retries;
  tail["scheduledAt"] = FormatUtcIso(job.scheduled_at);
  tail["createdAt"] = FormatUtcIso(job.created_at);
  tail["startedAt"] = job.started_at ? Json(FormatUtcIso(*job.started_at)) : Json();
  tail["completedAt"] = job.completed_at ? Json(FormatUtcIso(*job.completed_at)) : Json();
  tail["expiresAt"] = job.expires_at ? Json(FormatUtcIso(*job.expires_at)) : Json();
  tail["lastError"] = job.last_error ? Json(*job.last_error) : Json();
  tail["uniqueKey"] = job.unique_key ? Json(*job.unique_key) : Json();
  return text::JoinJsonObjects({Dump(head), "{\"payload\":" + payload + "}", Dump(tail)});
}

Result<JobSpec> JobSpecFromJson(std::string_view text) {
  if (!JsonDepthAllowed(text)) {
    return InvalidArgumentError("Request body nests arrays and objects deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  const Json body = Json::parse(text, nullptr, false);
  if (body.is_discarded())
    return InvalidArgumentError("Request body is not valid JSON: " + JsonErrorReason(text));
  if (!body.is_object()) return InvalidArgumentError("Request body must be a JSON object");
  static const char* const kFields[] = {"kind",        "payload",    "queue",    "priority",
                                        "scheduledAt", "maxRetries", "uniqueKey"};
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    if (!known) {
      return InvalidArgumentError(
          "Unknown field '" + key +
          "'; expected kind, payload, queue, priority, scheduledAt, maxRetries, uniqueKey");
    }
  }
  JobSpec spec;
  OCTOP_ASSIGN_OR_RETURN(spec.kind, NameField(body, "kind", true, ""));
  OCTOP_ASSIGN_OR_RETURN(spec.queue, NameField(body, "queue", false, "default"));
  // The payload's own text, not nlohmann's re-serialisation of it (core/json_text.h).
  if (std::optional<std::string_view> payload = text::JsonMemberText(text, "payload")) {
    if (text::JsonHasNulEscape(*payload)) {
      return InvalidArgumentError(std::string("'payload' ") + store::kNulEscapeInPayload);
    }
    spec.payload = text::CompactJson(*payload);
  }
  OCTOP_ASSIGN_OR_RETURN(auto priority, IntField(body, "priority", std::numeric_limits<int>::min() / 2,
                                                 std::numeric_limits<int>::max() / 2));
  if (priority) spec.priority = *priority;
  OCTOP_ASSIGN_OR_RETURN(auto max_retries, IntField(body, "maxRetries", 0, 1000));
  if (max_retries) spec.max_retries = *max_retries;
  if (auto it = body.find("scheduledAt"); it != body.end() && !it->is_null()) {
    std::optional<WallTime> at = it->is_string() ? ParseIsoInstant(it->get<std::string>()) : std::nullopt;
    if (!at) {
      return InvalidArgumentError(
          "'scheduledAt' must be an ISO 8601 instant with 'Z' or an offset between the years 1970 and 2200, "
          "e.g. 2026-01-01T00:00:00Z, got " +
          Dump(*it));
    }
    spec.scheduled_at = *at;
  }
  if (auto it = body.find("uniqueKey"); it != body.end() && !it->is_null()) {
    OCTOP_ASSIGN_OR_RETURN(std::string key, NameField(body, "uniqueKey", true, ""));
    spec.unique_key = std::move(key);
  }
  return spec;
}

namespace {

constexpr std::int64_t kListPayloadBudget = 4 << 20;

// A name parameter in a MonitoringCache key, as bytes with their length: any two different requests have
// different keys.
std::string ParamKey(const std::optional<std::string>& v) {
  return v ? std::to_string(v->size()) + ":" + *v : std::string("-");
}

std::string JobListText(const std::vector<JobInfo>& jobs) {
  std::string out = "[";
  for (const JobInfo& job : jobs) {
    if (out.size() > 1) out += ',';
    out += JobJsonText(job);
  }
  return out + "]";
}

Result<ApiResponse> SummaryResponse(JobQueue& q, MonitoringCache& kept) {
  OCTOP_ASSIGN_OR_RETURN(JobSummary summary, q.Summarize());
  std::int64_t jobs = 0;
  Json counts = Json::array();
  for (const JobStatusCount& c : summary.counts) {
    jobs += c.count;
    Json line;
    line["queue"] = c.queue;
    line["status"] = std::string(JobStatusName(c.status));
    line["count"] = c.count;
    line["oldestScheduledAt"] = c.oldest_scheduled_at ? Json(FormatUtcIso(*c.oldest_scheduled_at)) : Json();
    line["averageDelaySeconds"] =
        c.average_delay ? Json(std::chrono::duration<double>(*c.average_delay).count()) : Json();
    counts.push_back(std::move(line));
  }
  kept.NoteJobCount(jobs);
  return ApiResponse::Json(
      text::JoinJsonObjects({Dump(Json{{"counts", std::move(counts)}}),
                             "{\"latestFailed\":" + JobListText(summary.latest_failed) + "}",
                             Dump(Json{{"pausedQueues", summary.paused_queues}})}));
}

Result<ApiResponse> StatsResponse(JobQueue& q, const JobStatsFilter& params) {
  OCTOP_ASSIGN_OR_RETURN(JobStats stats, q.Stats(params));
  Json buckets = Json::array();
  long succeeded = 0, frozen = 0;
  for (const JobStatsBucket& b : stats.buckets) {
    succeeded += b.succeeded;
    frozen += b.frozen;
    buckets.push_back(Json{{"t", FormatUtcIso(b.start)},
                           {"succeeded", b.succeeded},
                           {"frozen", b.frozen},
                           {"avgLatencyMs", Millis(b.avg_latency)},
                           {"maxLatencyMs", Millis(b.max_latency)},
                           {"avgRunMs", Millis(b.avg_run)}});
  }
  return ApiResponse::Json(Dump(Json{{"now", FormatUtcIso(stats.db_now)},
                                     {"from", FormatUtcIso(stats.from)},
                                     {"to", FormatUtcIso(stats.to)},
                                     {"bucketSeconds", static_cast<double>(stats.bucket.count()) / 1e6},
                                     {"totals", Json{{"succeeded", succeeded}, {"frozen", frozen}}},
                                     {"buckets", std::move(buckets)}}));
}

}  // namespace

void AddJobRoutes(ApiServer& server, JobQueue& queue, const MonitoringCachePolicy& monitoring) {
  JobQueue* q = &queue;
  // Shared by the handlers below, which the server keeps: the summary and stats answers, dropped by every
  // operator action (monitoring_cache.h).
  auto kept = std::make_shared<MonitoringCache>(monitoring);
  server.AddRoute("POST", "/api/octop/v1/jobs", [q](const ApiRequest& req) -> Result<ApiResponse> {
    OCTOP_ASSIGN_OR_RETURN(JobSpec spec, JobSpecFromJson(req.body));
    OCTOP_ASSIGN_OR_RETURN(EnqueueResult r, q->Enqueue(spec));
    return ApiResponse::Json(Dump(Json{{"id", r.id}, {"existing", r.existing}}), r.existing ? 200 : 201);
  });
  server.AddRoute("GET", "/api/octop/v1/jobs", [q, kept](const ApiRequest& req) -> Result<ApiResponse> {
    JobFilter filter;
    OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> status, NameQuery(req, "status"));
    if (status) {
      filter.status = ParseJobStatus(*status);
      if (!filter.status) {
        return InvalidArgumentError("Unknown status '" + *status +
                                    "'; expected pending, running, success, failed or frozen");
      }
    }
    OCTOP_ASSIGN_OR_RETURN(filter.queue, NameQuery(req, "queue"));
    OCTOP_ASSIGN_OR_RETURN(filter.kind, NameQuery(req, "kind"));
    OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> limit_text, NameQuery(req, "limit"));
    if (const auto& v = limit_text) {
      int limit = 0;
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), limit);
      if (ec != std::errc() || end != v->data() + v->size() || limit < 1 || limit > 1000) {
        return InvalidArgumentError("'limit' must be an integer between 1 and 1000, got '" + *v + "'");
      }
      filter.limit = limit;
    }
    // A list carries at most kListPayloadBudget bytes of payloads (newest first), none with payload=false:
    // 1,000 jobs of 1 MB each would otherwise be a gigabyte in memory for one answer (docs/api.md).
    filter.payload_budget = kListPayloadBudget;
    OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> payload, NameQuery(req, "payload"));
    if (const auto& v = payload) {
      if (*v != "true" && *v != "false") {
        return InvalidArgumentError("'payload' must be true or false, got '" + *v + "'");
      }
      if (*v == "false") filter.payload_budget = 0;
    }
    // Any filter but the newest jobs of every status reads the whole history (no index on status, kind or
    // queue: docs/store.md §8.5), and the dashboard asks for two such lists every 2 s: kept like a summary.
    const std::string key = "jobs " + std::to_string(filter.status ? static_cast<int>(*filter.status) : -1) +
                            " " + ParamKey(filter.queue) + " " + ParamKey(filter.kind) + " " +
                            std::to_string(filter.limit) + " " + std::to_string(*filter.payload_budget);
    return kept->Get(key, [&]() -> Result<ApiResponse> {
      OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, q->ListJobs(filter));
      return ApiResponse::Json("{\"jobs\":" + JobListText(jobs) + "}");
    });
  });
  // Registered before /jobs/:id: the first matching route wins.
  server.AddRoute("GET", "/api/octop/v1/jobs/summary", [q, kept](const ApiRequest&) -> Result<ApiResponse> {
    return kept->Get("summary", [&]() -> Result<ApiResponse> { return SummaryResponse(*q, *kept); });
  });
  // The dashboard's sparkline: finished jobs per bucket over a recent window (Store::ComputeJobStats).
  server.AddRoute("GET", "/api/octop/v1/jobs/stats", [q, kept](const ApiRequest& req) -> Result<ApiResponse> {
    JobStatsFilter params;
    OCTOP_ASSIGN_OR_RETURN(params.window, DurationQuery(req, "window", params.window));
    OCTOP_ASSIGN_OR_RETURN(params.bucket, DurationQuery(req, "bucket", params.bucket));
    OCTOP_ASSIGN_OR_RETURN(params.queue, NameQuery(req, "queue"));
    OCTOP_ASSIGN_OR_RETURN(params.kind, NameQuery(req, "kind"));
    const std::string key = "stats " + std::to_string(params.window.count()) + " " +
                            std::to_string(params.bucket.count()) + " " + ParamKey(params.queue) + " " +
                            ParamKey(params.kind);
    return kept->Get(key, [&]() -> Result<ApiResponse> { return StatsResponse(*q, params); });
  });
  server.AddRoute("GET", "/api/octop/v1/jobs/:id", [q](const ApiRequest& req) -> Result<ApiResponse> {
    return JobResponse(*q, req.params[0]);
  });
  server.AddRoute("POST", "/api/octop/v1/jobs/:id/retry",
                  [q, kept](const ApiRequest& req) -> Result<ApiResponse> {
                    OCTOP_RETURN_IF_ERROR(q->RetryJob(req.params[0]));
                    kept->Clear();
                    return JobResponse(*q, req.params[0]);
                  });
  server.AddRoute("POST", "/api/octop/v1/jobs/:id/cancel",
                  [q, kept](const ApiRequest& req) -> Result<ApiResponse> {
                    OCTOP_RETURN_IF_ERROR(q->CancelJob(req.params[0]));
                    kept->Clear();
                    return JobResponse(*q, req.params[0]);
                  });
  for (const bool pause : {true, false}) {
    server.AddRoute("POST",
                    pause ? "/api/octop/v1/queues/:queue/pause" : "/api/octop/v1/queues/:queue/resume",
                    [q, kept, pause](const ApiRequest& req) -> Result<ApiResponse> {
                      const std::string& name = req.params[0];
                      if (name.empty() || name.size() > kMaxNameBytes) {
                        return InvalidArgumentError("Invalid queue name '" + name + "'");
                      }
                      OCTOP_RETURN_IF_ERROR(pause ? q->PauseQueue(name) : q->ResumeQueue(name));
                      kept->Clear();
                      return ApiResponse::Json(Dump(Json{{"queue", name}, {"paused", pause}}));
                    });
  }
}

}  // namespace octop::http
