// CronExpression: a parsed cron schedule with the semantics of the npm `cron` package's CronTime at
// version 3.5.0 (what @backstage/backend-defaults' `cron: ^3.0.0` resolves to) -- 5 fields (minute hour
// day-of-month month day-of-week) or 6 (a leading seconds field), lists, ranges, steps, month and day names
// (JAN, mon), and the package's @-macros (@yearly @monthly @weekly @daily @hourly @minutely @secondly
// @weekdays @weekends). Day-of-week 0 and 7 are both Sunday. Like that package, '?' is rejected; day-of-month
// and day-of-week are OR-ed when both are restricted. docs/cron.md describes the dialect and every quirk that
// is reproduced on purpose.
//
// Next() finds the next occurrence strictly after an instant, evaluated in an IANA time zone (default: the
// process's local zone, as Backstage does), reproducing that package's search step by step, including its
// handling of DST gaps (skipped local times) and overlaps (repeated local times) and its 8-year search
// horizon. tools/cron-oracle checks Parse() and Next() against the real package over random expressions,
// instants and zones.
//
// Thread-safety: CronExpression is an immutable value type; copies share the parsed fields. Next() and
// IsKnownTimeZone() may be called from any thread (the time-zone database is loaded once, behind a lock).
#ifndef OCTOP_CRON_H_
#define OCTOP_CRON_H_

#include <memory>
#include <string>
#include <string_view>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop {

// How a cron schedule meets a daylight-saving transition (docs/cron.md, "DST policies"). The default walks
// local time as the npm package does, which is what a Backstage node computes. A wall-clock policy fires at
// each local time that matches, and says what to do with one that does not exist (a spring-forward gap):
// `shift` runs at the first instant after the gap, `skip` does not run; and with one that exists twice (a
// fall-back overlap): `once` runs at the first, `twice` at both.
struct DstPolicy {
  enum class Gap { kShift, kSkip };
  enum class Overlap { kOnce, kTwice };
  bool wall_clock = false;  // false: the package's walk ("backstage"); gap and overlap are then unused
  Gap gap = Gap::kShift;
  Overlap overlap = Overlap::kOnce;

  // "backstage", or "<gap>,<overlap>": "shift,once", "shift,twice", "skip,once", "skip,twice".
  // InvalidArgument naming the accepted values otherwise.
  static Result<DstPolicy> Parse(std::string_view text);
  std::string ToString() const;
  bool operator==(const DstPolicy&) const = default;
};

class CronExpression {
 public:
  // The package searches this many (calendar) years past the start instant before giving up.
  static constexpr int kSearchHorizonYears = 8;

  // InvalidArgument naming the expression and what is wrong with it (the package's own reason, e.g.
  // `Invalid cron expression "61 * * * *": Field value (61) is out of range`) for anything CronTime rejects.
  static Result<CronExpression> Parse(std::string_view expression);

  // The next occurrence strictly after `after`, in time zone `tz` ("" = the process's local zone: the TZ
  // environment variable if set, else /etc/localtime; otherwise an IANA name such as "Europe/Paris"). `after`
  // is first truncated to whole milliseconds, as the package only sees a JavaScript Date. The result is
  // always a whole second. InvalidArgument for an unknown zone; NotFound when there is no occurrence within
  // kSearchHorizonYears (e.g. "0 0 30 2 *"); Internal for the package's own internal DST-search failures (it
  // throws there too).
  // Under a wall-clock `policy`, the next instant at which the zone's local time matches, with gaps and
  // overlaps handled as the policy says; the same horizon and errors, and never Internal.
  Result<WallTime> Next(WallTime after, std::string_view tz = "", DstPolicy policy = {}) const;

  const std::string& text() const { return text_; }
  // Whether the expression has a seconds field: six fields, or an @-macro (which the package expands to six).
  bool has_seconds() const;

  // Shared, immutable parsed fields; defined in cron.cc.
  struct Fields;

 private:
  std::string text_;
  std::shared_ptr<const Fields> fields_;
};

// The offset east of UTC of zone `tz` at `t`, as Next() reads zones ("" = the process's zone: TZ first, else
// /etc/localtime; the same names IsKnownTimeZone accepts). InvalidArgument for an unknown zone. For showing
// an instant in the zone its schedule uses.
Result<std::chrono::seconds> UtcOffset(WallTime t, std::string_view tz = "");

// Whether `tz` names a time zone this machine knows ("" = local is always known). Exact IANA names and links
// ("Europe/Paris", "UTC", "US/Eastern"); like luxon/Intl, a name differing only in letter case is accepted
// too.
bool IsKnownTimeZone(std::string_view tz);

}  // namespace octop

#endif  // OCTOP_CRON_H_
