// Duration: a length of time as Backstage writes it -- ISO-8601 (PT10M, P1DT2H, PT0.5S), the human strings of
// config files ('10m', '1h', '30 seconds', as the `ms` library reads them) and HumanDuration objects
// ({minutes: 10}) -- kept unit by unit, as luxon does, so that it prints back exactly as Backstage prints it:
// {minutes: 90} is PT90M, not PT1H30M; {milliseconds: 5000} is PT5S; {milliseconds: 1500} is PT1.5S.
//
// Conversions to a length (AsSeconds, ToChrono) use luxon's "casual" matrix: 1 year = 365 days, 1 month = 30 days,
// 1 week = 7 days. Durations may not be negative.
//
// Thread-safety: an immutable value type.
#ifndef OCTOP_DURATION_H_
#define OCTOP_DURATION_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <octop/status.h>

namespace octop {

// The object form of a duration (Backstage's HumanDuration). Absent fields are not set; values may be fractional.
struct HumanDuration {
  std::optional<double> years, months, weeks, days, hours, minutes, seconds, milliseconds;
};

class Duration {
 public:
  Duration() = default;  // zero: PT0S

  // ISO-8601 duration, as luxon's Duration.fromISO accepts it: P[nY][nM][nW][nD][T[nH][nM][n[.f]S]], fractions on
  // any unit, ',' as the decimal separator too. InvalidArgument naming the input otherwise.
  static Result<Duration> ParseIso(std::string_view text);
  // A config string, as Backstage's readDurationFromConfig reads it: a string starting with 'P' is ISO-8601; anything
  // else goes through the `ms` grammar ('10m', '1.5h', '2 days', '500ms'). Errors carry Backstage's messages.
  static Result<Duration> ParseConfigString(std::string_view text);
  // The object form; InvalidArgument for a negative or non-finite field.
  static Result<Duration> FromHuman(const HumanDuration& human);
  // luxon's Duration.fromMillis: {milliseconds: ms}, which prints as PT<ms/1000>S.
  static Duration FromMilliseconds(std::int64_t ms);

  // luxon's toISO(): units in order Y M W D T H M S; zero units omitted; seconds and milliseconds are merged into
  // one fractional seconds value; an all-zero duration is "PT0S".
  std::string ToIso() const;
  // luxon's .as('seconds') with the casual matrix; may be fractional (PT0.1S -> 0.1).
  double AsSeconds() const;
  // The length rounded to microseconds (the database's precision).
  std::chrono::microseconds ToChrono() const;
  bool IsZero() const;

  const HumanDuration& units() const { return units_; }

  friend bool operator==(const Duration& a, const Duration& b);

 private:
  HumanDuration units_;
};

}  // namespace octop

#endif  // OCTOP_DURATION_H_
