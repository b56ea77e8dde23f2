// Duration: a length of time as Backstage writes it -- ISO-8601 (PT10M, P1DT2H, PT0.5S), the human strings of
// config files ('10m', '1h', '30 seconds', as the `ms` library reads them) and HumanDuration objects
// ({minutes: 10}) -- kept unit by unit, as luxon does, so that it prints back exactly as Backstage prints it:
// {minutes: 90} is PT90M, not PT1H30M; {milliseconds: 5000} is PT5S; {milliseconds: 1500} is PT1.5S.
//
// Conversions to a length (AsSeconds, ToChrono) use luxon's "casual" matrix: 1 year = 365 days, 1 month = 30
// days, 1 week = 7 days. Durations may not be negative: every constructor refuses a minus sign or a negative
// unit, where luxon and Backstage would accept them (see docs/durations.md for the full grammar and every
// difference).
//
// Thread-safety: an immutable value type; all functions are pure and may be called from any thread.
#ifndef OCTOP_DURATION_H_
#define OCTOP_DURATION_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include <octop/status.h>

namespace octop {

// The object form of a duration (Backstage's HumanDuration). Absent fields are not set; values may be
// fractional.
struct HumanDuration {
  std::optional<double> years, months, weeks, days, hours, minutes, seconds, milliseconds;
};

class Duration {
 public:
  Duration() = default;  // zero: PT0S

  // ISO-8601 duration, exactly as luxon's Duration.fromISO accepts it:
  // [-]P[nY][nM][nW][nD][T[nH][nM][n[.,f]S]], at most 20 digits per number, '.' fractions on Y/M/W/D/H/M, '.'
  // or ',' on seconds (truncated to whole milliseconds, as luxon does), and even "P" or "PT" (zero). Any '-'
  // is refused (octop's choice). InvalidArgument naming the input otherwise, in luxon's words: `Invalid
  // duration, unparsable: the input "x" can't be parsed as ISO 8601`.
  static Result<Duration> ParseIso(std::string_view text);

  // A config string, as Backstage's readDurationFromConfig reads it (after JavaScript trim()): a string
  // starting with 'P' is ISO-8601 ("P" alone is "no values given"); anything else goes through the `ms`
  // grammar ('10m', '1.5h', '2 days', '500ms'), and the milliseconds are split greedily into years (365.25
  // d), weeks, days, hours, minutes, seconds and milliseconds ('90m' -> PT1H30M). octop also accepts several
  // value-unit tokens summed ('1h 30m', '1h30m', '2 days, 3 hours'). Errors carry Backstage's messages:
  //   Invalid duration '<trimmed text>' in config at '<key>', Error: <reason>
  // ("in config at '<key>'" is left out when key is empty).
  static Result<Duration> ParseConfigString(std::string_view text, std::string_view key = {});

  // A config value (a JSON view of the YAML node at `key`): a string goes to ParseConfigString; an object is
  // read as a HumanDuration like Backstage's parseObjectDuration (numbers, or strings JavaScript's Number()
  // accepts; unknown keys refused); `context` is the config source's name used in Backstage's messages (e.g.
  // 'app-config.yaml').
  static Result<Duration> ParseConfigValue(const nlohmann::json& value, std::string_view key,
                                           std::string_view context);

  // The object form; InvalidArgument for a negative or non-finite field.
  static Result<Duration> FromHuman(const HumanDuration& human);
  // luxon's Duration.fromMillis: {milliseconds: ms}, which prints as PT<ms/1000>S. REQUIRES: ms >= 0 (a
  // negative value is clamped to zero in release builds).
  static Duration FromMilliseconds(std::int64_t ms);

  // luxon's toISO(): units in order Y M W D T H M S; zero units omitted; seconds and milliseconds are merged
  // into one seconds value rounded to 3 decimals; numbers as JavaScript prints them (so {seconds: 1e21} is
  // PT1e+21S); an all-zero duration is "PT0S".
  std::string ToIso() const;
  // luxon's .as('seconds') with the casual matrix, with luxon's floating-point steps; may be fractional
  // (PT0.1S -> 0.1).
  double AsSeconds() const;
  // The length rounded to microseconds (the database's precision); saturates at microseconds::max() for
  // lengths beyond about 292,000 years.
  std::chrono::microseconds ToChrono() const;
  bool IsZero() const;

  const HumanDuration& units() const { return units_; }

  // luxon's Duration.equals: unit by unit, an absent unit equals 0 ({minutes: 90} != {hours: 1, minutes:
  // 30}).
  friend bool operator==(const Duration& a, const Duration& b);

 private:
  explicit Duration(const HumanDuration& units) : units_(units) {}

  HumanDuration units_;
};

}  // namespace octop

#endif  // OCTOP_DURATION_H_
