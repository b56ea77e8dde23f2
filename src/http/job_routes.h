// The job queue's REST API on octopd's ApiServer (docs/api.md, "Job queue"):
//
//   POST /api/octop/v1/jobs                       enqueue {kind, payload?, queue?, priority?,
//                                                 scheduledAt?, maxRetries?, uniqueKey?} -> 201 {id,
//                                                 existing:false}, or 200 {id, existing:true} when a live
//                                                 job holds the unique key
//   GET  /api/octop/v1/jobs?status=&queue=&kind=&limit=   {jobs:[...]}, newest first
//   GET  /api/octop/v1/jobs/summary               {counts:[...], latestFailed:[...], pausedQueues:[...]}
//   GET  /api/octop/v1/jobs/:id                   one job
//   POST /api/octop/v1/jobs/:id/retry | /cancel   the job afterwards; 404 / 409 in Backstage's error shape
//   POST /api/octop/v1/queues/:queue/pause | /resume   {queue, paused}
//
// Bodies are validated completely before anything is written: a malformed body or field is a 400 InputError
// whose message names the field and what was expected. Timestamps are UTC ISO 8601 with milliseconds
// ("2026-01-01T00:00:00.000Z"); scheduledAt accepts any ISO 8601 instant with 'Z' or a numeric offset.
//
// Ownership: the routes borrow the JobQueue, which must outlive the server. Thread-safety: handlers run on
// the server's threads; JobQueue is thread-safe.
#ifndef OCTOP_HTTP_JOB_ROUTES_H_
#define OCTOP_HTTP_JOB_ROUTES_H_

#include <optional>
#include <string>
#include <string_view>

#include <octop/clock.h>
#include <octop/queue.h>
#include <octop/status.h>

#include "http/api_server.h"
#include "http/monitoring_cache.h"
#include "http/task_json.h"  // FormatUtcIso

namespace octop::http {

// Adds the routes above. Call before server.Start(). The summary and stats answers are reused on a large
// job table as `monitoring` says (monitoring_cache.h).
void AddJobRoutes(ApiServer& server, JobQueue& queue, const MonitoringCachePolicy& monitoring = {});

// An ISO 8601 instant: date, 'T', time with optional fraction, then 'Z' or +hh:mm / +hhmm / +hh; years
// 1970..2200 (what WallTime can hold, with margin).
std::optional<WallTime> ParseIsoInstant(std::string_view text);

// The JSON text of one job; its payload is the stored JSON text as a value (not a string), compacted but
// otherwise unchanged.
std::string JobJsonText(const JobInfo& job);
// The JobSpec of a POST body; InvalidArgument naming the field on any problem.
Result<JobSpec> JobSpecFromJson(std::string_view body);

}  // namespace octop::http

#endif  // OCTOP_HTTP_JOB_ROUTES_H_
