#include "store/postgres/pg_timestamp.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include <endian.h>

namespace octop::store::postgres {

namespace {

using std::chrono::days;
using std::chrono::microseconds;

// Reads exactly `n` digits at `pos` (or, with n == 0, one or more).
bool ReadDigits(std::string_view s, std::size_t& pos, std::size_t n, long long& out) {
  std::size_t start = pos;
  out = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && (n == 0 || pos - start < n)) {
    out = out * 10 + (s[pos] - '0');
    ++pos;
  }
  return pos > start && (n == 0 || pos - start == n);
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos < s.size() && s[pos] == c) {
    ++pos;
    return true;
  }
  return false;
}

}  // namespace

std::string FormatTimestamp(WallTime t) {
  auto us = std::chrono::floor<microseconds>(t);
  auto day = std::chrono::floor<days>(us);
  std::chrono::year_month_day ymd{day};
  std::chrono::hh_mm_ss<microseconds> tod{us - day};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%06lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
                static_cast<int>(tod.seconds().count()), static_cast<long long>(tod.subseconds().count()));
  return buf;
}

Result<WallTime> ParseTimestamp(std::string_view s) {
  std::size_t pos = 0;
  long long year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  bool ok = ReadDigits(s, pos, 0, year) && Expect(s, pos, '-') && ReadDigits(s, pos, 2, month) &&
            Expect(s, pos, '-') && ReadDigits(s, pos, 2, day) &&
            (Expect(s, pos, ' ') || Expect(s, pos, 'T')) && ReadDigits(s, pos, 2, hour) &&
            Expect(s, pos, ':') && ReadDigits(s, pos, 2, minute) && Expect(s, pos, ':') &&
            ReadDigits(s, pos, 2, second);
  long long micros = 0;
  if (ok && Expect(s, pos, '.')) {
    std::size_t start = pos;
    long long frac = 0;
    ok = ReadDigits(s, pos, 0, frac) && pos - start <= 6;
    for (std::size_t i = pos - start; ok && i < 6; ++i) frac *= 10;
    micros = frac;
  }
  long long offset_seconds = 0;
  if (ok && pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    long long oh = 0, om = 0, os = 0;
    ok = ReadDigits(s, pos, 2, oh);
    if (ok && Expect(s, pos, ':')) ok = ReadDigits(s, pos, 2, om);
    if (ok && Expect(s, pos, ':')) ok = ReadDigits(s, pos, 2, os);
    offset_seconds = sign * (oh * 3600 + om * 60 + os);
  } else if (ok) {
    ok = Expect(s, pos, 'Z') || pos == s.size();
  }
  if (!ok || pos != s.size()) {
    return InternalError("PostgreSQL: unexpected timestamp text '" + std::string(s) + "'");
  }
  std::chrono::year_month_day ymd{std::chrono::year{static_cast<int>(year)},
                                  std::chrono::month{static_cast<unsigned>(month)},
                                  std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return InternalError("PostgreSQL: invalid date in timestamp '" + std::string(s) + "'");
  auto local = std::chrono::sys_days{ymd} + std::chrono::hours{hour} + std::chrono::minutes{minute} +
               std::chrono::seconds{second} + microseconds{micros};
  return std::chrono::time_point_cast<WallTime::duration>(local - std::chrono::seconds{offset_seconds});
}

Result<WallTime> ReadBinaryTimestamp(const char* bytes) {
  std::uint64_t raw = 0;
  std::memcpy(&raw, bytes, sizeof raw);
  const auto since_2000 = static_cast<std::int64_t>(be64toh(raw));
  // PostgreSQL's epoch is 946,684,800 s after the Unix one; a WallTime holds less than a timestamptz does.
  constexpr std::int64_t kEpochShift = 946'684'800'000'000;
  constexpr std::int64_t kMax =
      std::chrono::duration_cast<microseconds>(WallTime::duration::max()).count() - kEpochShift;
  constexpr std::int64_t kMin =
      std::chrono::duration_cast<microseconds>(WallTime::duration::min()).count() - kEpochShift;
  if (since_2000 > kMax || since_2000 < kMin)
    return InternalError("PostgreSQL: timestamp out of range (" + std::to_string(since_2000) +
                         " microseconds since 2000)");
  return WallTime(std::chrono::duration_cast<WallTime::duration>(microseconds(since_2000 + kEpochShift)));
}

std::string FormatInterval(std::chrono::microseconds d) {
  return std::to_string(d.count()) + " microseconds";
}

}  // namespace octop::store::postgres
