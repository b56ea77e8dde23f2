// How the SQLite backend writes and reads datetimes, which SQLite keeps as text.
//
// octop writes UTC 'YYYY-MM-DD HH:MM:SS.SSS': millisecond precision, sorts correctly as text, and datetime()
// / strftime() understand it. Backstage's knex backend writes 'YYYY-MM-DD HH:MM:SS' (CURRENT_TIMESTAMP,
// datetime()), and hand-written rows may use ISO 8601 with 'T' and 'Z' or an offset; ParseTime reads all of
// them.
//
// Thread-safety: pure functions.
#ifndef OCTOP_STORE_SQLITE_SQLITE_TIME_H_
#define OCTOP_STORE_SQLITE_SQLITE_TIME_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <octop/clock.h>

namespace octop::store::sqlite {

// 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, rounded down to the millisecond.
std::string FormatTime(WallTime t);

// Parses 'YYYY-MM-DD', then optionally ' ' or 'T' and 'HH:MM[:SS[.fraction]]', then optionally 'Z' or
// '+HH:MM' /
// '-HH:MM' / '+HHMM' / '+HH'. No zone means UTC (what SQLite's own functions produce). Fractions beyond
// microseconds are dropped. nullopt for anything else.
std::optional<WallTime> ParseTime(std::string_view text);

// A strftime() modifier that adds `d`: '+90.000000 seconds', '-0.500000 seconds'.
std::string OffsetModifier(std::chrono::microseconds d);

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_SQLITE_TIME_H_
