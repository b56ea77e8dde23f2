// CronExpression: a parsed cron schedule with the semantics of the npm `cron` package's CronTime, which Backstage
// uses -- 5 fields (minute hour day-of-month month day-of-week) or 6 (a leading seconds field), lists, ranges, steps,
// month and day names (JAN, mon), '?', and the @-macros of that package (@yearly, @monthly, @weekly, @daily,
// @hourly, @minutely, ...). Day-of-week 0 and 7 are both Sunday.
//
// Next() finds the next occurrence strictly after an instant, evaluated in an IANA time zone (default: the process's
// local zone, as Backstage does), with that package's handling of DST gaps (skipped local times) and overlaps
// (repeated local times). tools/cron-oracle checks Next() against the real package over random expressions.
//
// Thread-safety: an immutable value type.
#ifndef OCTOP_CRON_H_
#define OCTOP_CRON_H_

#include <memory>
#include <string>
#include <string_view>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop {

class CronExpression {
 public:
  // InvalidArgument naming the expression and the offending field otherwise.
  static Result<CronExpression> Parse(std::string_view expression);

  // The next occurrence strictly after `after`, in time zone `tz` ("" = local, else an IANA name such as
  // "Europe/Paris"). InvalidArgument for an unknown zone; NotFound if there is none within the search horizon
  // (e.g. 30 February).
  Result<WallTime> Next(WallTime after, std::string_view tz = "") const;

  const std::string& text() const { return text_; }
  bool has_seconds() const;

  // Shared, immutable parsed fields; defined in cron.cc.
  struct Fields;

 private:
  std::string text_;
  std::shared_ptr<const Fields> fields_;
};

// Whether `tz` names a time zone this machine knows ("" = local is always known).
bool IsKnownTimeZone(std::string_view tz);

}  // namespace octop

#endif  // OCTOP_CRON_H_
