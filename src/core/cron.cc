// CronExpression: a transcription of the npm `cron` package's CronTime (v3.5.0: _parse, _parseField,
// getNextDateFrom and its DST helpers) over a small emulation of the luxon DateTime operations it relies on.
//
// The package's search is not a clean "next matching local time" function: it steps through local time with
// luxon's set()/plus(), whose offset guessing decides what happens in DST gaps and overlaps, and it has a few
// deliberate special cases (it returns the first instant after a skipped range that would have matched).
// Re-deriving those rules differently would disagree with Backstage in edge cases, so this file mirrors the
// package step by step and tools/cron-oracle checks it against the real thing.
#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <date/tz.h>

#include <octop/cron.h>

#include "core/js_text.h"
#include "core/time_zone.h"

namespace octop {

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Fields.

enum Unit { kSecond = 0, kMinute, kHour, kDayOfMonth, kMonth, kDayOfWeek, kUnitCount };

constexpr std::array<std::string_view, kUnitCount> kUnitNames = {"second",     "minute", "hour",
                                                                 "dayOfMonth", "month",  "dayOfWeek"};
constexpr std::array<int64_t, kUnitCount> kLow = {0, 0, 0, 1, 1, 0};
constexpr std::array<int64_t, kUnitCount> kHigh = {59, 59, 23, 31, 12, 7};
// How many distinct values make a field "all": the package compares Object.keys(field).length with these.
constexpr std::array<int, kUnitCount> kFullCount = {60, 60, 24, 31, 12, 7};

}  // namespace

struct CronExpression::Fields {
  std::array<std::array<bool, 64>, kUnitCount> set{};
  std::array<int, kUnitCount> count{};
  bool has_seconds = false;

  bool Has(Unit unit, int64_t value) const {
    return value >= 0 && value < 64 && set[static_cast<size_t>(unit)][static_cast<size_t>(value)];
  }
  bool Full(Unit unit) const {
    return count[static_cast<size_t>(unit)] == kFullCount[static_cast<size_t>(unit)];
  }
};

namespace {

using Fields = CronExpression::Fields;
using tz::Civil;
using tz::CivilFromLocalMs;
using tz::DaysFromCivil;
using tz::DaysInMonth;
using tz::FloorDiv;
using tz::FloorMod;
using tz::kMsPerDay;
using tz::kMsPerHour;
using tz::kMsPerMinute;
using tz::kMsPerSecond;
using tz::LocalMsFromCivil;
using tz::ResolveZone;
using tz::Zone;

// Thrown inside Parse, caught at its edge; carries the package's error message.
struct ParseFailure {
  std::string reason;
};

constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kPresets = {{
    {"@yearly", "0 0 0 1 1 *"},
    {"@monthly", "0 0 0 1 * *"},
    {"@weekly", "0 0 0 * * 0"},
    {"@daily", "0 0 0 * * *"},
    {"@hourly", "0 0 * * * *"},
    {"@minutely", "0 * * * * *"},
    {"@secondly", "* * * * * *"},
    {"@weekdays", "0 0 0 * * 1-5"},
    {"@weekends", "0 0 0 * * 0,6"},
}};

constexpr std::array<std::pair<std::string_view, int>, 19> kAliases = {{
    {"jan", 1}, {"feb", 2}, {"mar", 3},  {"apr", 4},  {"may", 5},  {"jun", 6}, {"jul", 7},
    {"aug", 8}, {"sep", 9}, {"oct", 10}, {"nov", 11}, {"dec", 12}, {"sun", 0}, {"mon", 1},
    {"tue", 2}, {"wed", 3}, {"thu", 4},  {"fri", 5},  {"sat", 6},
}};

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// source.trim().split(/\s+/)
std::vector<std::string> SplitOnJsWhitespace(std::string_view s) {
  std::vector<std::string> parts;
  std::string current;
  bool pending_separator = false;
  size_t i = 0;
  while (i < s.size()) {
    const size_t ws = text::JsWhitespaceLength(s, i);
    if (ws > 0) {
      pending_separator = true;
      i += ws;
      continue;
    }
    if (pending_separator && !current.empty()) {
      parts.push_back(std::move(current));
      current.clear();
    }
    pending_separator = false;
    current.push_back(s[i]);
    ++i;
  }
  parts.push_back(std::move(current));  // "" for an empty or all-blank source, as split does
  return parts;
}

std::vector<std::string_view> SplitOnComma(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
}

// parseInt(digits, 10), saturated: every value the package compares is tiny, so "huge" is all that matters.
int64_t ParseDigits(std::string_view digits) {
  constexpr int64_t kSaturated = int64_t{1} << 60;
  int64_t value = 0;
  for (const char c : digits) {
    value = value >= kSaturated / 10 ? kSaturated : value * 10 + (c - '0');
  }
  return value;
}

struct RangeMatch {
  std::string_view lower;
  std::optional<std::string_view> upper;
  std::optional<std::string_view> step;
};

// /^(\d+)(?:-(\d+))?(?:\/(\d+))?$/
std::optional<RangeMatch> MatchRange(std::string_view s) {
  size_t i = 0;
  const auto digits = [&]() -> std::optional<std::string_view> {
    const size_t begin = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == begin) return std::nullopt;
    return s.substr(begin, i - begin);
  };
  RangeMatch m;
  auto lower = digits();
  if (!lower) return std::nullopt;
  m.lower = *lower;
  if (i < s.size() && s[i] == '-') {
    ++i;
    m.upper = digits();
    if (!m.upper) return std::nullopt;
  }
  if (i < s.size() && s[i] == '/') {
    ++i;
    m.step = digits();
    if (!m.step) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return m;
}

void ParseField(std::string_view original_value, Unit unit, Fields& fields) {
  const auto u = static_cast<size_t>(unit);
  const int64_t low = kLow[u];
  const int64_t high = kHigh[u];
  const std::string unit_name(kUnitNames[u]);

  for (const std::string_view part : SplitOnComma(original_value)) {
    const size_t wildcard = part.find('*');
    if (wildcard != std::string_view::npos && wildcard != 0) {
      throw ParseFailure{"Field (" + std::string(part) + ") has an invalid wildcard expression"};
    }
  }
  std::string value;
  for (const char c : original_value) {
    if (c == '*') {
      value += std::to_string(low) + "-" + std::to_string(high);
    } else {
      value.push_back(c);
    }
  }

  auto& set = fields.set[u];
  for (const std::string_view range : SplitOnComma(value)) {
    const std::optional<RangeMatch> match = MatchRange(range);
    if (!match) throw ParseFailure{"Field (" + unit_name + ") cannot be parsed"};
    const int64_t lower = ParseDigits(match->lower);
    const std::optional<int64_t> upper =
        match->upper ? std::optional<int64_t>(ParseDigits(*match->upper)) : std::nullopt;
    const int64_t step = match->step ? ParseDigits(*match->step) : 1;
    if (step == 0) throw ParseFailure{"Field (" + unit_name + ") has a step of zero"};
    if (upper && lower > *upper) throw ParseFailure{"Field (" + unit_name + ") has an invalid range"};
    if (lower < low || (upper && *upper > high) || (!upper && lower > high)) {
      throw ParseFailure{"Field value (" + value + ") is out of range"};
    }
    const int64_t last = upper ? *upper : (match->step ? high : lower);
    int64_t pointer = lower;
    do {
      set[static_cast<size_t>(pointer)] = true;
      pointer += step;
    } while (pointer <= last);
    if (unit == kDayOfWeek) {
      if (!set[0] && set[7]) set[0] = true;
      set[7] = false;
    }
  }
  fields.count[u] = static_cast<int>(std::count(set.begin(), set.end(), true));
}

Fields ParseSource(std::string_view expression) {
  // source.toLowerCase(): non-ASCII characters can never form an alias or a number, so lowering ASCII
  // suffices.
  std::string source(expression);
  for (char& c : source) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  bool preset = false;
  for (const auto& [name, expansion] : kPresets) {
    if (source == name) {
      source = std::string(expansion);
      preset = true;
      break;
    }
  }
  // source.replace(/[a-z]{1,3}/gi, alias => ...): runs of letters are cut into 3-letter pieces from the left.
  std::string replaced;
  for (size_t i = 0; i < source.size();) {
    if (!IsAsciiLetter(source[i])) {
      replaced.push_back(source[i]);
      ++i;
      continue;
    }
    size_t n = 0;
    while (n < 3 && i + n < source.size() && IsAsciiLetter(source[i + n])) ++n;
    const std::string_view alias = std::string_view(source).substr(i, n);
    const auto it =
        std::find_if(kAliases.begin(), kAliases.end(), [&](const auto& a) { return a.first == alias; });
    if (it == kAliases.end()) throw ParseFailure{"Unknown alias: " + std::string(alias)};
    replaced += std::to_string(it->second);
    i += n;
  }

  const std::vector<std::string> units = SplitOnJsWhitespace(replaced);
  if (units.size() < kUnitCount - 1) throw ParseFailure{"Too few fields"};
  if (units.size() > kUnitCount) throw ParseFailure{"Too many fields"};

  Fields fields;
  fields.has_seconds = preset || units.size() == kUnitCount;
  const size_t skipped = kUnitCount - units.size();
  for (size_t u = 0; u < kUnitCount; ++u) {
    const std::string_view value = u < skipped ? std::string_view("0") : std::string_view(units[u - skipped]);
    ParseField(value, static_cast<Unit>(u), fields);
  }
  return fields;
}

// ---------------------------------------------------------------------------------------------------------------
// The luxon DateTime operations CronTime uses. A luxon DateTime is an instant plus a zone; its offset is
// always zone.offset(ts) and its calendar fields follow from both.

struct Dt {
  int64_t ts = 0;
  int64_t o = 0;  // offset, ms
  Civil c;
};

// Thrown where the package throws a CronError during the search.
struct SearchFailure {
  bool horizon = false;
  std::string reason;
};

class Luxon {
 public:
  explicit Luxon(const Zone& zone) : zone_(zone) {}

  Dt At(int64_t ts) const {
    Dt dt;
    dt.ts = ts;
    dt.o = zone_.OffsetMs(ts);
    dt.c = CivilFromLocalMs(ts + dt.o);
    return dt;
  }

  // luxon's fixOffset: the instant for a local time, guessing the offset from `o` first.
  int64_t FixOffset(int64_t local_ts, int64_t o) const {
    int64_t utc_guess = local_ts - o;
    const int64_t o2 = zone_.OffsetMs(utc_guess);
    if (o == o2) return utc_guess;
    utc_guess -= o2 - o;
    const int64_t o3 = zone_.OffsetMs(utc_guess);
    if (o2 == o3) return utc_guess;
    // A gap: keep the local time, read with the smaller offset (so it lands after the gap).
    return local_ts - std::min(o2, o3);
  }

  // dt.set({...}) with the given fields replaced; `day_set` says whether the day was among them.
  Dt Set(const Dt& dt, const Civil& mixed_in, bool day_set) const {
    Civil mixed = mixed_in;
    if (!day_set) mixed.day = std::min(DaysInMonth(mixed.year, mixed.month), mixed.day);
    return At(FixOffset(LocalMsFromCivil(mixed), dt.o));
  }

  // dt.plus({years, months, days}): calendar arithmetic, the day clamped to the target month first.
  Dt PlusCalendar(const Dt& dt, int64_t years, int64_t months, int64_t days) const {
    Civil c = dt.c;
    c.year += years;
    c.month += months;
    c.day = std::min(dt.c.day, DaysInMonth(c.year, c.month)) + days;
    return At(FixOffset(LocalMsFromCivil(c), dt.o));
  }

  // dt.plus({minutes/seconds}): plain instant arithmetic.
  Dt PlusMs(const Dt& dt, int64_t ms) const { return At(dt.ts + ms); }

 private:
  const Zone& zone_;
};

int64_t WeekDay(const Civil& c) { return FloorMod(DaysFromCivil(c.year, c.month, c.day) + 4, 7); }

// Whether day-of-month and day-of-week accept `c`'s day, as the package's search tests them: OR-ed when both
// are restricted, else the restricted one.
bool DayFieldsMatch(const Fields& f, const Civil& c) {
  const bool dom = f.Has(kDayOfMonth, c.day);
  const bool dow = f.Has(kDayOfWeek, WeekDay(c));
  const bool dom_full = f.Full(kDayOfMonth);
  const bool dow_full = f.Full(kDayOfWeek);
  return !((!dom && !dom_full && !(dow && !dow_full)) || (!dow && !dow_full && !(dom && !dom_full)));
}

// CronTime.getNextDateFrom, line by line.
class Search {
 public:
  Search(const Fields& f, const Zone& zone) : f_(f), lx_(zone) {}

  int64_t NextFrom(int64_t start_ms) {
    const Dt start = lx_.At(start_ms);
    Dt date = start;
    const int64_t first_date = start.ts;
    if (date.c.millisecond > 0) {
      Civil c = date.c;
      c.millisecond = 0;
      c.second += 1;
      date = lx_.Set(date, c, false);
    }
    // DateTime.now().plus({ years: 8 }); Backstage calls sendAt() at "now", so now is the start instant.
    const Dt max_match = lx_.PlusCalendar(start, CronExpression::kSearchHorizonYears, 0, 0);

    // The package has no such bound and loops forever on a few inputs (a restricted hour that falls in a DST
    // gap at midnight, see docs/cron.md). A legitimate search takes at most a few thousand steps (one per day
    // of the horizon, plus at most 24 + 60 + 60 within the matching day).
    constexpr int kIterationLimit = 20'000;
    for (int iteration = 0;; ++iteration) {
      if (iteration > kIterationLimit) {
        throw SearchFailure{false, "the search does not terminate (the npm cron package loops forever here)"};
      }
      const int64_t diff = date.ts - start.ts;
      if (date.ts > max_match.ts) {
        throw SearchFailure{true, "No execution date was found in the next 8 years"};
      }
      if (!f_.Has(kMonth, date.c.month) && !f_.Full(kMonth)) {
        date = lx_.PlusCalendar(date, 0, 1, 0);
        date = SetTime(date, 1, 0, 0, 0, std::nullopt);
        if (StepToDay(date)) break;
        continue;
      }
      if (!DayFieldsMatch(f_, date.c)) {
        date = lx_.PlusCalendar(date, 0, 0, 1);
        date = SetTime(date, std::nullopt, 0, 0, 0, std::nullopt);
        if (StepToDay(date)) break;
        continue;
      }
      if (!f_.Has(kHour, date.c.hour) && !f_.Full(kHour)) {
        const int64_t expected_hour = date.c.hour == 23 && diff > kMsPerDay ? 0 : date.c.hour + 1;
        const int64_t expected_minute = date.c.minute;
        date = SetTime(date, std::nullopt, expected_hour, std::nullopt, std::nullopt, std::nullopt);
        date = SetTime(date, std::nullopt, std::nullopt, 0, 0, std::nullopt);
        if (ForwardDstJump(expected_hour, expected_minute, date) && HandleJump(date)) break;
        continue;
      }
      if (!f_.Has(kMinute, date.c.minute) && !f_.Full(kMinute)) {
        const int64_t expected_minute = date.c.minute == 59 && diff > kMsPerHour ? 0 : date.c.minute + 1;
        const int64_t expected_hour = date.c.hour + (expected_minute == 60 ? 1 : 0);
        date = SetTime(date, std::nullopt, std::nullopt, expected_minute, std::nullopt, std::nullopt);
        date = SetTime(date, std::nullopt, std::nullopt, std::nullopt, 0, std::nullopt);
        if (ForwardDstJump(expected_hour, expected_minute, date) && HandleJump(date)) break;
        continue;
      }
      if (!f_.Has(kSecond, date.c.second) && !f_.Full(kSecond)) {
        const int64_t expected_second = date.c.second == 59 && diff > kMsPerMinute ? 0 : date.c.second + 1;
        const int64_t expected_minute = date.c.minute + (expected_second == 60 ? 1 : 0);
        const int64_t expected_hour = date.c.hour + (expected_minute == 60 ? 1 : 0);
        date = SetTime(date, std::nullopt, std::nullopt, std::nullopt, expected_second, std::nullopt);
        if (ForwardDstJump(expected_hour, expected_minute, date) && HandleJump(date)) break;
        continue;
      }
      if (date.ts == first_date) {
        const int64_t expected_second = date.c.second + 1;
        const int64_t expected_minute = date.c.minute + (expected_second == 60 ? 1 : 0);
        const int64_t expected_hour = date.c.hour + (expected_minute == 60 ? 1 : 0);
        date = SetTime(date, std::nullopt, std::nullopt, std::nullopt, expected_second, std::nullopt);
        if (ForwardDstJump(expected_hour, expected_minute, date) && HandleJump(date)) break;
        continue;
      }
      break;
    }
    return date.ts;
  }

 private:
  // dt.set({day?, hour?, minute?, second?, millisecond?}).
  Dt SetTime(const Dt& dt, std::optional<int64_t> day, std::optional<int64_t> hour,
             std::optional<int64_t> minute, std::optional<int64_t> second,
             std::optional<int64_t> millisecond) const {
    Civil c = dt.c;
    if (day) c.day = *day;
    if (hour) c.hour = *hour;
    if (minute) c.minute = *minute;
    if (second) c.second = *second;
    if (millisecond) c.millisecond = *millisecond;
    return lx_.Set(dt, c, day.has_value());
  }

  // After a month or day step set the time to midnight: midnight may not exist (a DST gap at 00:00).
  bool StepToDay(Dt& date) { return ForwardDstJump(0, 0, date) && HandleJump(date); }

  // `[isDone, newDate] = this._findPreviousDSTJump(date); date = newDate;` -- returns isDone.
  bool HandleJump(Dt& date) {
    auto [done, new_date] = FindPreviousDstJump(date);
    date = new_date;
    return done;
  }

  static bool ForwardDstJump(int64_t expected_hour, int64_t expected_minute, const Dt& actual) {
    return FloorMod(expected_hour, 24) < actual.c.hour || FloorMod(expected_minute, 60) < actual.c.minute;
  }

  std::pair<bool, Dt> FindPreviousDstJump(const Dt& date) const {
    constexpr int kLimit = 60 * 24;
    Dt maybe = date;
    int64_t expected_minute = 0;
    int64_t expected_hour = 0;
    int iteration = 0;
    do {
      if (++iteration > kLimit) {
        throw SearchFailure{false, "the DST check assumes the input is within 24 hours of a DST jump"};
      }
      expected_minute = maybe.c.minute - 1;
      expected_hour = maybe.c.hour;
      if (expected_minute < 0) {
        expected_minute += 60;
        expected_hour = (expected_hour + 24 - 1) % 24;
      }
      maybe = lx_.PlusMs(maybe, -kMsPerMinute);
    } while (expected_minute == maybe.c.minute && expected_hour == maybe.c.hour);

    Dt after = lx_.PlusMs(maybe, kMsPerMinute);
    after = SetTime(after, std::nullopt, std::nullopt, std::nullopt, 0, 0);
    const Dt before = lx_.PlusMs(after, -kMsPerSecond);
    if (f_.Has(kMonth, date.c.month) && f_.Has(kDayOfMonth, date.c.day) &&
        f_.Has(kDayOfWeek, WeekDay(date.c))) {
      return {CheckTimeInSkippedRange(before, after), after};
    }
    return {false, after};
  }

  bool CheckTimeInSkippedRange(const Dt& before, const Dt& after) const {
    const int64_t starting_minute = (before.c.minute + 1) % 60;
    const int64_t starting_hour = (before.c.hour + (starting_minute == 0 ? 1 : 0)) % 24;
    const int64_t hour_range_size = after.c.hour - starting_hour + 1;
    const bool is_hour_jump = starting_minute == 0 && after.c.minute == 0;
    if (hour_range_size == 2 && is_hour_jump) return f_.Has(kHour, starting_hour);
    if (hour_range_size == 1) {
      return f_.Has(kHour, starting_hour) && InSkippedSingleHour(starting_minute, after.c.minute);
    }
    return InSkippedMultiHour(starting_hour, starting_minute, after.c.hour, after.c.minute);
  }

  bool InSkippedSingleHour(int64_t start_minute, int64_t end_minute) const {
    for (int64_t minute = start_minute; minute < end_minute; ++minute) {
      if (f_.Has(kMinute, minute)) return true;
    }
    return f_.Has(kMinute, end_minute) && f_.Has(kSecond, 0);
  }

  bool InSkippedMultiHour(int64_t start_hour, int64_t start_minute, int64_t end_hour,
                          int64_t end_minute) const {
    if (start_hour >= end_hour) {
      throw SearchFailure{false, "the DST check assumes the forward jump's starting hour (" +
                                     std::to_string(start_hour) + ") is less than its end hour (" +
                                     std::to_string(end_hour) + ")"};
    }
    for (int64_t hour = start_hour; hour <= end_hour; ++hour) {
      if (!f_.Has(kHour, hour)) continue;
      const int64_t first = hour == start_hour ? start_minute : 0;
      const int64_t last = hour == start_hour ? 60 : (hour == end_hour ? end_minute : 60);
      for (int64_t minute = first; minute < last; ++minute) {
        if (f_.Has(kMinute, minute)) return true;
      }
    }
    return f_.Has(kHour, end_hour) && f_.Has(kMinute, end_minute) && f_.Has(kSecond, 0);
  }

  const Fields& f_;
  Luxon lx_;
};

// ---------------------------------------------------------------------------------------------------------------
// The wall-clock DST policies (docs/cron.md, "DST policies"): the next local time that matches, in civil-time
// order, mapped to its instants -- none in a gap, two in an overlap -- as the policy says. Not the package's
// walk: a plain search over local days, hours, minutes and seconds.

class WallClockSearch {
 public:
  WallClockSearch(const Fields& f, const Zone& zone, DstPolicy policy)
      : f_(f), zone_(zone), policy_(policy) {}

  // The first whole-second instant after `after_ms`, in milliseconds.
  int64_t NextAfter(int64_t after_ms) {
    const int64_t after = FloorDiv(after_ms, kMsPerSecond);
    const std::vector<int64_t>& near = OffsetsNear(after);
    // Under the smallest offset about, the local time of every instant after `after` is at or past this.
    const int64_t start = after + near.front();
    const Civil start_civil = CivilFromLocalMs(start * kMsPerSecond);
    const int64_t horizon_year = start_civil.year + CronExpression::kSearchHorizonYears;
    const int64_t last_day =
        DaysFromCivil(horizon_year, start_civil.month,
                      std::min(start_civil.day, DaysInMonth(horizon_year, start_civil.month)));
    std::optional<int64_t> best;
    for (int64_t local = start;;) {
      const std::optional<int64_t> match = NextLocalMatch(local, last_day);
      if (!match) break;
      // A later local time reads as an instant no earlier than this under the largest offset about.
      if (best && *match - OffsetsNear(*match).back() > *best) break;
      for (const int64_t instant : Instants(*match)) {
        if (instant > after && (!best || instant < *best)) best = instant;
      }
      local = *match + 1;
    }
    if (!best) throw SearchFailure{true, "No execution date was found in the next 8 years"};
    return *best * kMsPerSecond;
  }

 private:
  int64_t OffsetAt(int64_t t) const { return zone_.OffsetMs(t * kMsPerSecond) / kMsPerSecond; }

  // The distinct offsets within 30 hours either side of `t` (sampled hourly; every zone's offset is within
  // 15 hours of UTC), sorted. Cached per hour.
  const std::vector<int64_t>& OffsetsNear(int64_t t) {
    const int64_t hour = FloorDiv(t, 3600);
    auto it = offsets_near_.find(hour);
    if (it != offsets_near_.end()) return it->second;
    std::vector<int64_t> offsets;
    for (int64_t k = -30; k <= 30; ++k) offsets.push_back(OffsetAt((hour + k) * 3600));
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    return offsets_near_.emplace(hour, std::move(offsets)).first->second;
  }

  // The instants at which the local time is `local` (seconds), as the policy maps them.
  std::vector<int64_t> Instants(int64_t local) {
    std::vector<int64_t> instants;
    for (const int64_t o : OffsetsNear(local)) {
      if (OffsetAt(local - o) == o) instants.push_back(local - o);
    }
    std::sort(instants.begin(), instants.end());
    if (instants.size() > 1 && policy_.overlap == DstPolicy::Overlap::kOnce) instants.resize(1);
    if (instants.empty() && policy_.gap == DstPolicy::Gap::kShift) {
      // The first instant whose local time is past `local`: the end of the gap.
      const std::vector<int64_t>& near = OffsetsNear(local);
      int64_t lo = local - near.back();  // its local time is before `local`
      int64_t hi = local - near.front();
      if (hi + OffsetAt(hi) > local) {
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (mid + OffsetAt(mid) > local ? hi : lo) = mid;
        }
        instants.push_back(hi);
      }
    }
    return instants;
  }

  bool DayMatches(const Civil& c) const { return f_.Has(kMonth, c.month) && DayFieldsMatch(f_, c); }

  // The first local time (seconds) at or after `local` that matches, up to the end of day `last_day`.
  std::optional<int64_t> NextLocalMatch(int64_t local, int64_t last_day) const {
    const Civil from = CivilFromLocalMs(local * kMsPerSecond);
    int64_t day = DaysFromCivil(from.year, from.month, from.day);
    for (bool first = true; day <= last_day; ++day, first = false) {
      const Civil c = CivilFromLocalMs(day * kMsPerDay);
      if (!DayMatches(c)) continue;
      for (int64_t h = first ? from.hour : 0; h < 24; ++h) {
        if (!f_.Has(kHour, h)) continue;
        const bool same_hour = first && h == from.hour;
        for (int64_t m = same_hour ? from.minute : 0; m < 60; ++m) {
          if (!f_.Has(kMinute, m)) continue;
          for (int64_t s = same_hour && m == from.minute ? from.second : 0; s < 60; ++s) {
            if (f_.Has(kSecond, s)) return day * 86400 + h * 3600 + m * 60 + s;
          }
        }
      }
    }
    return std::nullopt;
  }

  const Fields& f_;
  const Zone& zone_;
  const DstPolicy policy_;
  std::map<int64_t, std::vector<int64_t>> offsets_near_;
};

std::string Quote(std::string_view s) {
  std::string out = "\"";
  out += s;
  out += '"';
  return out;
}

}  // namespace

Result<CronExpression> CronExpression::Parse(std::string_view expression) {
  try {
    CronExpression parsed;
    parsed.text_ = std::string(expression);
    parsed.fields_ = std::make_shared<const Fields>(ParseSource(expression));
    return parsed;
  } catch (const ParseFailure& failure) {
    return InvalidArgumentError("Invalid cron expression " + Quote(expression) + ": " + failure.reason);
  }
}

bool CronExpression::has_seconds() const { return fields_ != nullptr && fields_->has_seconds; }

Result<WallTime> CronExpression::Next(WallTime after, std::string_view tz, DstPolicy policy) const {
  if (fields_ == nullptr) return InternalError("Next() on a default-constructed CronExpression");
  const std::optional<Zone> zone = ResolveZone(tz);
  if (!zone) return InvalidArgumentError("Unknown time zone " + Quote(tz));
  const int64_t after_ms = std::chrono::floor<std::chrono::milliseconds>(after.time_since_epoch()).count();
  // Keep the search and its result inside what a nanosecond system_clock can represent.
  constexpr int64_t kLimitMs = int64_t{9'000'000'000'000'000'000} / 1'000'000;
  if (after_ms > kLimitMs - int64_t{10} * 366 * kMsPerDay || after_ms < -kLimitMs) {
    return InvalidArgumentError("Instant out of range for cron expression " + Quote(text_));
  }
  const std::string where = " for cron expression " + Quote(text_) + (tz.empty() ? "" : " in " + Quote(tz));
  if (policy.wall_clock) {
    try {
      WallClockSearch search(*fields_, *zone, policy);
      return WallTime(std::chrono::duration_cast<WallTime::duration>(
          std::chrono::milliseconds(search.NextAfter(after_ms))));
    } catch (const SearchFailure& failure) {
      return NotFoundError(failure.reason + where);
    }
  }
  // The package's algorithm can answer a time before `after` (in a fall-back's repeated hour, e.g.
  // Antarctica/Troll's two-hour one). A scheduler must never go back: such an answer is searched again from a
  // little later, doubling the step, and the first occurrence after `after` is the answer (docs/cron.md,
  // "Where octop differs from the npm package: it never goes back").
  for (int64_t step_ms = 0; step_ms <= kMsPerDay; step_ms = step_ms == 0 ? 1000 : step_ms * 2) {
    try {
      Search search(*fields_, *zone);
      const int64_t next_ms = search.NextFrom(after_ms + step_ms);
      if (next_ms > after_ms) {
        return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::milliseconds(next_ms)));
      }
    } catch (const SearchFailure& failure) {
      if (failure.horizon) return NotFoundError(failure.reason + where);
      return InternalError("Cron search failed" + where + ": " + failure.reason);
    }
  }
  return InternalError("Cron search failed" + where + ": no occurrence after the instant within a day of it");
}

Result<DstPolicy> DstPolicy::Parse(std::string_view text) {
  if (text == "backstage") return DstPolicy{};
  const size_t comma = text.find(',');
  DstPolicy policy;
  policy.wall_clock = true;
  if (comma != std::string_view::npos) {
    const std::string_view gap = text.substr(0, comma);
    const std::string_view overlap = text.substr(comma + 1);
    const bool gap_ok = gap == "shift" || gap == "skip";
    const bool overlap_ok = overlap == "once" || overlap == "twice";
    if (gap_ok && overlap_ok) {
      policy.gap = gap == "skip" ? Gap::kSkip : Gap::kShift;
      policy.overlap = overlap == "twice" ? Overlap::kTwice : Overlap::kOnce;
      return policy;
    }
  }
  return InvalidArgumentError(
      "Invalid DST policy " + Quote(text) +
      ": expected \"backstage\" or \"<gap>,<overlap>\" with gap shift or skip and overlap "
      "once or twice (e.g. \"shift,once\")");
}

std::string DstPolicy::ToString() const {
  if (!wall_clock) return "backstage";
  return std::string(gap == Gap::kSkip ? "skip" : "shift") + "," +
         (overlap == Overlap::kTwice ? "twice" : "once");
}

bool IsKnownTimeZone(std::string_view tz) { return tz.empty() || tz::FindZone(tz) != nullptr; }

Result<std::chrono::seconds> UtcOffset(WallTime t, std::string_view tz) {
  const std::optional<Zone> zone = ResolveZone(tz);
  if (!zone) return InvalidArgumentError("unknown time zone '" + std::string(tz) + "'");
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  return std::chrono::seconds(zone->OffsetMs(ms) / kMsPerSecond);
}

}  // namespace octop
