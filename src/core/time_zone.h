// Calendar arithmetic and time zones as JavaScript sees them, for the cron search (cron.cc): dates on int64
// milliseconds with JavaScript's Date.UTC overflow rules, and a zone's UTC offset at an instant as luxon
// (over ICU) reports it -- the howardhinnant tz database for explicit transitions, extended past the last one
// with the POSIX TZ rule of the TZif file's footer, as ICU keeps applying it (the library stops at the file's
// last transition, 2037 with Debian's data). docs/cron.md, "Next occurrence and time zones".
//
// Thread-safety: pure functions; ResolveZone caches footers under a mutex and may be called from any thread.
#ifndef OCTOP_CORE_TIME_ZONE_H_
#define OCTOP_CORE_TIME_ZONE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace date {
class time_zone;
}  // namespace date

namespace octop::tz {

inline constexpr int64_t kMsPerSecond = 1000;
inline constexpr int64_t kMsPerMinute = 60 * kMsPerSecond;
inline constexpr int64_t kMsPerHour = 60 * kMsPerMinute;
inline constexpr int64_t kMsPerDay = 24 * kMsPerHour;

inline int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}
inline int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil, in int64).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d);

struct Civil {
  int64_t year = 1970;
  int64_t month = 1;
  int64_t day = 1;
  int64_t hour = 0;
  int64_t minute = 0;
  int64_t second = 0;
  int64_t millisecond = 0;
};

// The calendar fields of milliseconds since the epoch read as local time, and back (fields may overflow, as
// Date.UTC allows).
Civil CivilFromLocalMs(int64_t local_ms);
int64_t LocalMsFromCivil(const Civil& c);
bool IsLeapYear(int64_t y);
// 28..31; `month` may lie outside 1..12 (it is normalised into `year` first).
int64_t DaysInMonth(int64_t year, int64_t month);

struct PosixRule;

// A time zone: UTC, or a tz database zone with its footer rule.
class Zone {
 public:
  // nullptr = UTC.
  Zone(const date::time_zone* tz, std::shared_ptr<const PosixRule> footer);

  // luxon's zone.offset(ts) in milliseconds: the offset at the start of ts's second.
  int64_t OffsetMs(int64_t ts_ms) const;

 private:
  const date::time_zone* tz_;
  std::shared_ptr<const PosixRule> footer_;
};

// The zone of an IANA name: the exact name first, then (like Intl) ignoring case. nullptr if unknown.
const date::time_zone* FindZone(std::string_view name);

// The zone `name` names; "" is the process's local zone as Node picks it (TZ if set, unknown or empty = UTC,
// else /etc/localtime). nullopt for an unknown name.
std::optional<Zone> ResolveZone(std::string_view name);

}  // namespace octop::tz

#endif  // OCTOP_CORE_TIME_ZONE_H_
