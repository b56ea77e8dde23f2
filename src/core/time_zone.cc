#include "core/time_zone.h"

#include <array>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include <date/tz.h>

namespace octop::tz {

int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

Civil CivilFromLocalMs(int64_t local_ms) {
  const int64_t days = FloorDiv(local_ms, kMsPerDay);
  int64_t rem = local_ms - days * kMsPerDay;
  const int64_t z = days + 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  Civil c;
  c.day = doy - (153 * mp + 2) / 5 + 1;
  c.month = mp < 10 ? mp + 3 : mp - 9;
  c.year = yoe + era * 400 + (c.month <= 2 ? 1 : 0);
  c.hour = rem / kMsPerHour;
  rem -= c.hour * kMsPerHour;
  c.minute = rem / kMsPerMinute;
  rem -= c.minute * kMsPerMinute;
  c.second = rem / kMsPerSecond;
  c.millisecond = rem - c.second * kMsPerSecond;
  return c;
}

// Date.UTC(year, month - 1, day, hour, minute, second, millisecond) with JavaScript's overflow rules.
int64_t LocalMsFromCivil(const Civil& c) {
  const int64_t month0 = c.month - 1;
  const int64_t year = c.year + FloorDiv(month0, 12);
  const int64_t month = FloorMod(month0, 12) + 1;
  const int64_t days = DaysFromCivil(year, month, 1) + c.day - 1;
  return days * kMsPerDay + c.hour * kMsPerHour + c.minute * kMsPerMinute + c.second * kMsPerSecond +
         c.millisecond;
}

bool IsLeapYear(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

// luxon's daysInMonth, which accepts an overflowing month.
int64_t DaysInMonth(int64_t year, int64_t month) {
  const int64_t mod_month = FloorMod(month - 1, 12) + 1;
  const int64_t mod_year = year + (month - mod_month) / 12;
  static constexpr std::array<int64_t, 12> kDays = {31, 0, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mod_month == 2) return IsLeapYear(mod_year) ? 29 : 28;
  return kDays[static_cast<size_t>(mod_month - 1)];
}

// The POSIX TZ rule of a TZif footer, e.g. "CET-1CEST,M3.5.0,M10.5.0/3".
struct PosixRule {
  struct Date {
    char kind =
        'M';  // 'J': Julian day 1..365 without Feb 29; 'N': zero-based day 0..365; 'M': month.week.day
    int64_t a = 0, b = 0, c = 0;
    int64_t time_s = 2 * 3600;
  };
  int64_t std_offset_s = 0;  // east of UTC
  int64_t dst_offset_s = 0;
  Date start, end;
};

namespace {

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class PosixParser {
 public:
  explicit PosixParser(std::string_view s) : s_(s) {}

  std::optional<PosixRule> Parse() {
    PosixRule rule;
    if (!Name()) return std::nullopt;
    auto std_off = Offset();
    if (!std_off) return std::nullopt;
    rule.std_offset_s = -*std_off;
    if (AtEnd()) return std::nullopt;  // no DST: the library's last transition is the answer
    if (!Name()) return std::nullopt;
    rule.dst_offset_s = rule.std_offset_s + 3600;
    if (!AtEnd() && Peek() != ',') {
      auto dst_off = Offset();
      if (!dst_off) return std::nullopt;
      rule.dst_offset_s = -*dst_off;
    }
    if (AtEnd()) {
      rule.start = {'M', 3, 2, 0, 2 * 3600};
      rule.end = {'M', 11, 1, 0, 2 * 3600};
      return rule;
    }
    if (!Eat(',') || !RuleDate(rule.start) || !Eat(',') || !RuleDate(rule.end) || !AtEnd())
      return std::nullopt;
    return rule;
  }

 private:
  bool AtEnd() const { return i_ >= s_.size(); }
  char Peek() const { return s_[i_]; }
  bool Eat(char c) {
    if (AtEnd() || Peek() != c) return false;
    ++i_;
    return true;
  }
  bool Name() {
    if (Eat('<')) {
      const size_t close = s_.find('>', i_);
      if (close == std::string_view::npos) return false;
      i_ = close + 1;
      return true;
    }
    const size_t begin = i_;
    while (!AtEnd() && IsAsciiLetter(Peek())) ++i_;
    return i_ - begin >= 3;
  }
  std::optional<int64_t> Number() {
    const size_t begin = i_;
    int64_t v = 0;
    while (!AtEnd() && IsDigit(Peek()) && i_ - begin < 4) v = v * 10 + (s_[i_++] - '0');
    if (i_ == begin) return std::nullopt;
    return v;
  }
  // [+-]hh[:mm[:ss]] in seconds, sign as written.
  std::optional<int64_t> Offset() {
    int64_t sign = 1;
    if (Eat('-')) {
      sign = -1;
    } else {
      Eat('+');
    }
    auto h = Number();
    if (!h) return std::nullopt;
    int64_t total = *h * 3600;
    if (Eat(':')) {
      auto m = Number();
      if (!m) return std::nullopt;
      total += *m * 60;
      if (Eat(':')) {
        auto sec = Number();
        if (!sec) return std::nullopt;
        total += *sec;
      }
    }
    return sign * total;
  }
  bool RuleDate(PosixRule::Date& d) {
    if (Eat('J')) {
      d.kind = 'J';
      auto n = Number();
      if (!n) return false;
      d.a = *n;
    } else if (Eat('M')) {
      d.kind = 'M';
      auto m = Number();
      if (!m || !Eat('.')) return false;
      auto w = Number();
      if (!w || !Eat('.')) return false;
      auto wd = Number();
      if (!wd) return false;
      d.a = *m;
      d.b = *w;
      d.c = *wd;
    } else {
      d.kind = 'N';
      auto n = Number();
      if (!n) return false;
      d.a = *n;
    }
    d.time_s = 2 * 3600;
    if (Eat('/')) {
      auto t = Offset();
      if (!t) return false;
      d.time_s = *t;
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// The local midnight (as days since the epoch) of a rule date in `year`.
int64_t RuleDay(const PosixRule::Date& d, int64_t year) {
  const int64_t jan1 = DaysFromCivil(year, 1, 1);
  switch (d.kind) {
    case 'J': {
      int64_t day = jan1 + d.a - 1;
      if (IsLeapYear(year) && d.a >= 60) ++day;
      return day;
    }
    case 'N':
      return jan1 + d.a;
    default: {
      const int64_t first = DaysFromCivil(year, d.a, 1);
      const int64_t first_wd = FloorMod(first + 4, 7);  // 0 = Sunday
      int64_t day = first + FloorMod(d.c - first_wd, 7) + (d.b - 1) * 7;
      const int64_t month_end = first + DaysInMonth(year, d.a);
      while (day >= month_end) day -= 7;
      return day;
    }
  }
}

// Offset east of UTC, in seconds, at UTC second `t` according to the rule.
int64_t PosixOffsetAt(const PosixRule& rule, int64_t t) {
  const int64_t year = CivilFromLocalMs(t * kMsPerSecond).year;
  int64_t best_time = INT64_MIN;
  int64_t best_offset = rule.std_offset_s;
  for (int64_t y = year - 1; y <= year + 1; ++y) {
    // The start is given in standard time, the end in daylight time.
    const int64_t start = RuleDay(rule.start, y) * 86400 + rule.start.time_s - rule.std_offset_s;
    const int64_t end = RuleDay(rule.end, y) * 86400 + rule.end.time_s - rule.dst_offset_s;
    if (start <= t && start > best_time) {
      best_time = start;
      best_offset = rule.dst_offset_s;
    }
    if (end <= t && end >= best_time) {
      best_time = end;
      best_offset = rule.std_offset_s;
    }
  }
  return best_offset;
}

std::optional<PosixRule> ReadFooter(const std::string& zone_name) {
  std::ifstream in("/usr/share/zoneinfo/" + zone_name, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 6 || data.compare(0, 4, "TZif") != 0 || data[4] < '2' || data.back() != '\n') {
    return std::nullopt;
  }
  const size_t begin = data.rfind('\n', data.size() - 2);
  if (begin == std::string::npos) return std::nullopt;
  return PosixParser(std::string_view(data).substr(begin + 1, data.size() - begin - 2)).Parse();
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Exact name first, then (like Intl) ignoring case. nullptr if unknown.
}  // namespace

const date::time_zone* FindZone(std::string_view name) {
  try {
    return date::locate_zone(name);
  } catch (const std::exception&) {
  }
  try {
    const std::string lower = AsciiLower(name);
    for (const date::time_zone& z : date::get_tzdb().zones) {
      if (AsciiLower(z.name()) == lower) return &z;
    }
  } catch (const std::exception&) {
  }
  return nullptr;
}

std::optional<Zone> ResolveZone(std::string_view name) {
  const date::time_zone* tz = nullptr;
  if (name.empty()) {
    // The process's local zone, as Node picks it: TZ if set (unknown or empty = UTC), else /etc/localtime.
    const char* env = std::getenv("TZ");
    if (env != nullptr) {
      std::string_view tz_env(env);
      if (!tz_env.empty() && tz_env.front() == ':') tz_env.remove_prefix(1);
      tz = tz_env.empty() ? nullptr : FindZone(tz_env);
    } else {
      try {
        tz = date::current_zone();
      } catch (const std::exception&) {
        tz = nullptr;
      }
    }
  } else {
    tz = FindZone(name);
    if (tz == nullptr) return std::nullopt;
  }
  if (tz == nullptr) return Zone(nullptr, nullptr);

  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const PosixRule>, std::less<>> footers;
  std::lock_guard<std::mutex> lock(mu);
  auto it = footers.find(tz->name());
  if (it == footers.end()) {
    std::optional<PosixRule> rule = ReadFooter(tz->name());
    it = footers.emplace(tz->name(), rule ? std::make_shared<const PosixRule>(*rule) : nullptr).first;
  }
  return Zone(tz, it->second);
}

Zone::Zone(const date::time_zone* tz, std::shared_ptr<const PosixRule> footer)
    : tz_(tz), footer_(std::move(footer)) {}

int64_t Zone::OffsetMs(int64_t ts_ms) const {
  if (tz_ == nullptr) return 0;
  const int64_t t = FloorDiv(ts_ms, kMsPerSecond);
  const date::sys_info info = tz_->get_info(date::sys_seconds(std::chrono::seconds(t)));
  // The library marks "no later transition" with an end in year 32767 (not sys_seconds::max()).
  static const date::sys_seconds kOpenEnded = date::sys_days(date::year(9999) / 1 / 1);
  if (footer_ != nullptr && info.end >= kOpenEnded) return PosixOffsetAt(*footer_, t) * kMsPerSecond;
  return static_cast<int64_t>(info.offset.count()) * kMsPerSecond;
}

}  // namespace octop::tz
