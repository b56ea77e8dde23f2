// Text forms of timestamptz and interval as the PostgreSQL backend binds and reads them, and the binary form
// of a timestamptz as it reads job rows (docs/store.md §8.3 ClaimJobs).
//
// Sent: ISO 8601 in UTC with microseconds ("2026-01-01T00:00:00.123456Z"), which timestamptz input accepts
// whatever the session's zone. Received: the ISO DateStyle output of a TimeZone=UTC session ("2026-01-01
// 00:00:00.123456+00", the fraction absent when zero). PostgreSQL keeps microseconds, so a WallTime
// round-trips at that precision.
//
// Thread-safety: pure functions.
#ifndef OCTOP_STORE_POSTGRES_PG_TIMESTAMP_H_
#define OCTOP_STORE_POSTGRES_PG_TIMESTAMP_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop::store::postgres {

std::string FormatTimestamp(WallTime t);
Result<WallTime> ParseTimestamp(std::string_view text);
// A timestamptz in binary format: 8 bytes, big-endian microseconds since 2000-01-01 00:00 UTC. kInternal for
// a value a WallTime cannot hold (beyond about 1678-2261, infinity included), as ParseTimestamp for text it
// cannot read.
Result<WallTime> ReadBinaryTimestamp(const char* bytes);
// An interval literal ("1500000 microseconds"): exact, unlike float seconds.
std::string FormatInterval(std::chrono::microseconds d);

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_PG_TIMESTAMP_H_
