#include "store/sqlite/sqlite_time.h"

#include <cstdint>
#include <cstdio>

namespace octop::store::sqlite {

namespace {

// A cursor over the text being parsed.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  bool AtEnd() const { return i_ == s_.size(); }
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool Accept(char c) {
    if (!Peek(c)) return false;
    ++i_;
    return true;
  }
  bool PeekDigit() const { return i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; }
  // Exactly `n` digits.
  bool Number(int n, int& out) {
    out = 0;
    for (int k = 0; k < n; ++k) {
      if (!PeekDigit()) return false;
      out = out * 10 + (s_[i_++] - '0');
    }
    return true;
  }
  // One or more digits read as a fraction of a second, kept to microseconds.
  bool Fraction(std::int64_t& micros) {
    if (!PeekDigit()) return false;
    micros = 0;
    int kept = 0;
    while (PeekDigit()) {
      if (kept < 6) {
        micros = micros * 10 + (s_[i_] - '0');
        ++kept;
      }
      ++i_;
    }
    for (; kept < 6; ++kept) micros *= 10;
    return true;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::string FormatTime(WallTime t) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<days>(ms);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> hms{ms - day};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d.%03d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()), static_cast<int>(hms.subseconds().count()));
  return buf;
}

std::optional<WallTime> ParseTime(std::string_view text) {
  using namespace std::chrono;
  Scanner in(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  std::int64_t micros = 0;
  if (!in.Number(4, y) || !in.Accept('-') || !in.Number(2, mo) || !in.Accept('-') || !in.Number(2, d)) {
    return std::nullopt;
  }
  if (in.Accept(' ') || in.Accept('T')) {
    if (!in.Number(2, h) || !in.Accept(':') || !in.Number(2, mi)) return std::nullopt;
    if (in.Accept(':')) {
      if (!in.Number(2, s)) return std::nullopt;
      if (in.Accept('.') && !in.Fraction(micros)) return std::nullopt;
    }
  }
  int offset_minutes = 0;
  if (in.Accept('Z')) {
  } else if (in.Peek('+') || in.Peek('-')) {
    const int sign = in.Accept('-') ? -1 : (in.Accept('+'), 1);
    int oh = 0, om = 0;
    if (!in.Number(2, oh)) return std::nullopt;
    if (in.Accept(':')) {
      if (!in.Number(2, om)) return std::nullopt;
    } else if (in.PeekDigit() && !in.Number(2, om)) {
      return std::nullopt;
    }
    if (oh > 23 || om > 59) return std::nullopt;
    offset_minutes = sign * (oh * 60 + om);
  }
  if (!in.AtEnd()) return std::nullopt;
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
  const auto t =
      sys_days{ymd} + hours{h} + minutes{mi} + seconds{s} + microseconds{micros} - minutes{offset_minutes};
  return time_point_cast<WallTime::duration>(t);
}

std::string OffsetModifier(std::chrono::microseconds d) {
  const std::int64_t us = d.count();
  const std::uint64_t magnitude =
      us < 0 ? 0 - static_cast<std::uint64_t>(us) : static_cast<std::uint64_t>(us);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%c%llu.%06llu seconds", us < 0 ? '-' : '+',
                static_cast<unsigned long long>(magnitude / 1000000),
                static_cast<unsigned long long>(magnitude % 1000000));
  return buf;
}

}  // namespace octop::store::sqlite
