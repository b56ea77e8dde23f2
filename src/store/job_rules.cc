#include "store/job_rules.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include <nlohmann/json.hpp>
#include <sys/random.h>
#include <uuid/uuid.h>

#include <octop/json_depth.h>

#include "core/js_text.h"
#include "core/json_text.h"

namespace octop::store {

bool IsStorableText(std::string_view s) {
  return s.find('\0') == std::string_view::npos && text::IsValidUtf8(s);
}

Status ValidateJobName(std::string_view what, std::string_view name) {
  if (name.empty()) return InvalidArgumentError(std::string(what) + " must not be empty");
  if (name.size() > kMaxJobNameBytes) {
    return InvalidArgumentError(std::string(what) + " is " + std::to_string(name.size()) +
                                " bytes, the limit is " + std::to_string(kMaxJobNameBytes));
  }
  if (name.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(std::string(what) + " contains the character U+0000, which no store keeps");
  }
  if (!IsStorableText(name)) return InvalidArgumentError(std::string(what) + " is not valid UTF-8 text");
  return Status::Ok();
}

Status ValidateEnqueueJob(std::size_t index, const JobSpec& job) {
  const std::string at = "job " + std::to_string(index) + ": ";
  if (Status s = ValidateJobName("queue", job.queue); !s.ok()) return InvalidArgumentError(at + s.message());
  if (Status s = ValidateJobName("kind", job.kind); !s.ok()) return InvalidArgumentError(at + s.message());
  if (job.unique_key) {
    if (Status s = ValidateJobName("unique_key", *job.unique_key); !s.ok())
      return InvalidArgumentError(at + s.message());
  }
  if (job.max_retries < 0) {
    return InvalidArgumentError(at + "max_retries must be >= 0, got " + std::to_string(job.max_retries));
  }
  if (!IsStorableText(job.payload)) return InvalidArgumentError(at + "payload is not valid UTF-8 text");
  if (!JsonDepthAllowed(job.payload)) {
    return InvalidArgumentError(at + "payload nests arrays and objects deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  if (!nlohmann::json::accept(job.payload)) {
    return InvalidArgumentError(at + "payload is not valid JSON: " + job.payload.substr(0, 200));
  }
  if (text::JsonHasNulEscape(job.payload)) {
    // SQLite would keep it; refused there too, so a payload that works on one backend works on the other.
    return InvalidArgumentError(at + "payload " + kNulEscapeInPayload);
  }
  return Status::Ok();
}

Status ValidateEnqueueBatch(const std::vector<JobSpec>& jobs) {
  if (jobs.empty()) return InvalidArgumentError("EnqueueJobs needs at least one job");
  if (jobs.size() > kMaxEnqueueBatch) {
    return InvalidArgumentError("EnqueueJobs takes at most " + std::to_string(kMaxEnqueueBatch) +
                                " jobs at once, got " + std::to_string(jobs.size()));
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) OCTOP_RETURN_IF_ERROR(ValidateEnqueueJob(i, jobs[i]));
  return Status::Ok();
}

std::string TruncateJobError(std::string_view error) {
  std::string out;
  out.reserve(std::min(error.size(), kMaxJobErrorBytes));
  for (std::size_t i = 0; i < error.size();) {
    std::size_t n = error[i] == '\0' ? 0 : text::Utf8SequenceLength(error, i);
    std::string_view piece = n == 0 ? std::string_view("?") : error.substr(i, n);
    if (out.size() + piece.size() > kMaxJobErrorBytes) break;
    out.append(piece);
    i += n == 0 ? 1 : n;
  }
  return out;
}

bool IsJobId(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> NewJobIds(std::size_t n, WallTime at) {
  // One getrandom(2) call for the batch. libuuid's uuid_generate_random makes several system calls per id
  // (it reseeds a fallback generator from getpid/getuid every time): measured, 6 % of the client's CPU in
  // the enqueue+drain figure (docs/performance.md, "Client-side cost per job"). libuuid still
  // writes the text.
  std::vector<unsigned char> bytes(16 * n);
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
    } else if (got == 0 || errno != EINTR) {  // no source (never on Linux >= 3.17): libuuid's own way
      for (std::size_t i = filled / 16 * 16; i < bytes.size(); i += 16) uuid_generate_random(&bytes[i]);
      filled = bytes.size();
    }
  }
  // Version 7 (RFC 9562): the first 48 bits are the Unix time in milliseconds, so the jobs enqueued together
  // sit together in the primary key, and a claim's or a completion batch's lookups touch a few adjacent index
  // pages instead of one random page per job (measured: docs/store.md, "Job ids"). 74 random bits remain.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
  const auto unix_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, ms));
  std::vector<std::string> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < bytes.size(); i += 16) {
    unsigned char* uuid = &bytes[i];
    for (int b = 0; b < 6; ++b) uuid[b] = static_cast<unsigned char>(unix_ms >> (8 * (5 - b)));
    uuid[6] = static_cast<unsigned char>((uuid[6] & 0x0f) | 0x70);  // version 7
    uuid[8] = static_cast<unsigned char>((uuid[8] & 0x3f) | 0x80);  // RFC 9562 variant
    char text[37];
    uuid_unparse_lower(uuid, text);
    ids.emplace_back(text);
  }
  return ids;
}

std::string NewJobId(WallTime at) { return std::move(NewJobIds(1, at).front()); }

Status NoSuchJob(std::string_view id) { return NotFoundError("Job " + std::string(id) + " does not exist"); }

Result<JobStats> JobStatsGrid(const JobStatsFilter& params, WallTime now) {
  using std::chrono::microseconds;
  const microseconds second = std::chrono::seconds(1);
  if (params.bucket < second || params.bucket % std::chrono::milliseconds(1) != microseconds(0)) {
    return InvalidArgumentError(
        "job stats: the bucket must be a whole number of milliseconds, at least 1 second");
  }
  if (params.window < second || params.window > std::chrono::hours(24 * 7)) {
    return InvalidArgumentError("job stats: the window must be between 1 second and 7 days");
  }
  const std::int64_t n = (params.window.count() + params.bucket.count() - 1) / params.bucket.count();
  if (n > kMaxJobStatsBuckets) {
    return InvalidArgumentError("job stats: at most " + std::to_string(kMaxJobStatsBuckets) +
                                " buckets, got " + std::to_string(n) + " (window / bucket)");
  }
  const microseconds now_us = std::chrono::floor<microseconds>(now.time_since_epoch());
  // Aligned to the epoch, so that a refresh a few seconds later shows the same buckets.
  microseconds current = now_us - now_us % params.bucket;
  if (now_us.count() < 0 && now_us % params.bucket != microseconds(0)) current -= params.bucket;
  JobStats stats;
  stats.db_now = now;
  stats.bucket = params.bucket;
  stats.to = WallTime{} + std::chrono::duration_cast<WallTime::duration>(current + params.bucket);
  stats.from = stats.to - std::chrono::duration_cast<WallTime::duration>(params.bucket * n);
  stats.buckets.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    stats.buckets[static_cast<std::size_t>(i)].start =
        stats.from + std::chrono::duration_cast<WallTime::duration>(params.bucket * i);
  }
  return stats;
}

}  // namespace octop::store
