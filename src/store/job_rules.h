// Job-queue rules every Store backend applies the same way before it touches the database: enqueue
// validation, error truncation, id shape, and fresh ids. Kept out of the backends so SQLite and PostgreSQL
// cannot drift apart (the conformance suite checks the resulting behaviour, this file is where it is
// decided).
//
// Thread-safety: pure functions, except NewJobId(s), which draw from the system's random source
// (thread-safe).
#ifndef OCTOP_STORE_JOB_RULES_H_
#define OCTOP_STORE_JOB_RULES_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/job_store.h"

namespace octop::store {

// Checks one enqueue item; kInvalidArgument "job <index>: <field> ..." naming what is wrong.
Status ValidateEnqueueJob(std::size_t index, const JobSpec& job);
// Checks a whole batch (every item, before any write): empty batches and more than kMaxEnqueueBatch items are
// rejected too.
Status ValidateEnqueueBatch(const std::vector<JobSpec>& jobs);
inline constexpr std::size_t kMaxEnqueueBatch = 10000;

// Why a payload holding the escape \u0000 is refused, after the field's name (text::JsonHasNulEscape).
inline constexpr char kNulEscapeInPayload[] =
    "contains the escape \\u0000 in a string: PostgreSQL's jsonb cannot store U+0000, so no backend takes it";

// A queue name, kind, unique key or config key: 1..kMaxJobNameBytes bytes of valid UTF-8 without NUL.
Status ValidateJobName(std::string_view what, std::string_view name);

// Valid UTF-8 without NUL bytes (what PostgreSQL text accepts).
bool IsStorableText(std::string_view s);

// `error` cut to at most kMaxJobErrorBytes, never inside a UTF-8 sequence; invalid UTF-8 bytes become '?', so
// the text is storable on every backend.
std::string TruncateJobError(std::string_view error);

// A lower-case canonical UUID text (8-4-4-4-12 hex digits). Lookups by anything else find nothing.
bool IsJobId(std::string_view id);

// A fresh job id: a version 7 UUID (RFC 9562: `at` in Unix milliseconds, then 74 random bits) in lower-case
// canonical text; NewJobIds: `n` of them from one read of the system's random source. The time only orders
// ids for the index's sake (docs/store.md, "Job ids"); nothing reads it back, so the wall clock will do.
std::string NewJobId(WallTime at = std::chrono::system_clock::now());
std::vector<std::string> NewJobIds(std::size_t n, WallTime at = std::chrono::system_clock::now());

Status NoSuchJob(std::string_view id);

// The bucket grid of ComputeJobStats at the database's `now`: validates params and returns JobStats with
// db_now, from, to, bucket and every bucket's start filled in (counts zero), for the backend to fill from
// its GROUP BY rows by bucket index.
Result<JobStats> JobStatsGrid(const JobStatsFilter& params, WallTime now);

}  // namespace octop::store

#endif  // OCTOP_STORE_JOB_RULES_H_
