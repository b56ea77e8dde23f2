#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <octop/duration.h>

#include "core/js_text.h"

namespace octop {
namespace {

// Unit lengths in milliseconds, as the `ms` library and Backstage's parseMsDuration define them.
constexpr double kMsSecond = 1000;
constexpr double kMsMinute = kMsSecond * 60;
constexpr double kMsHour = kMsMinute * 60;
constexpr double kMsDay = kMsHour * 24;
constexpr double kMsWeek = kMsDay * 7;
constexpr double kMsYear = kMsDay * 365.25;

// luxon's casual matrix, unit -> seconds.
constexpr double kSecYear = 365.0 * 24 * 60 * 60;
constexpr double kSecMonth = 30.0 * 24 * 60 * 60;
constexpr double kSecWeek = 7.0 * 24 * 60 * 60;
constexpr double kSecDay = 24.0 * 60 * 60;
constexpr double kSecHour = 60.0 * 60;
constexpr double kSecMinute = 60.0;

constexpr std::string_view kBadIsoFormat =
    "Invalid ISO format, expected a value similar to 'P2DT6H' (2 days 6 hours) or 'PT1M' (1 minute)";
constexpr std::string_view kNoIsoValues = "Invalid ISO format, no values given";
constexpr std::string_view kPlainNumber =
    "The value cannot be a plain number; try adding a unit like 'ms' or 'seconds'";
constexpr std::string_view kNotADurationString =
    "Not a valid duration string, try a number followed by a unit such as '1d' or '2 seconds'";
constexpr std::string_view kNegative = "Negative durations are not allowed";
constexpr std::string_view kPropList =
    "'years', 'months', 'weeks', 'days', 'hours', 'minutes', 'seconds', 'milliseconds'";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// parseFloat of a string already known to be a plain decimal ([-]digits[.digits]); from_chars rounds
// correctly, as JavaScript does.
double ParseDecimal(std::string_view text) {
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// JavaScript's Math.round: to nearest, ties towards +infinity.
double JsRound(double x) {
  if (!std::isfinite(x)) return x;
  double floor = std::floor(x);
  return (x - floor >= 0.5) ? floor + 1 : floor;
}

// JavaScript's Number.prototype.toString() (ECMA-262 Number::toString, radix 10): shortest round-trip digits,
// plain notation for exponents in [-7, 21), otherwise "1.5e+21" / "1e-7".
std::string JsNumberToString(double x) {
  if (std::isnan(x)) return "NaN";
  if (x == 0) return "0";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  std::string sign;
  if (x < 0) {
    sign = "-";
    x = -x;
  }
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::scientific);
  (void)ec;
  std::string_view sci(buf.data(), static_cast<std::size_t>(end - buf.data()));
  std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::string_view exp_text = sci.substr(e_pos + 1);
  if (!exp_text.empty() && exp_text.front() == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // x = 0.digits * 10^n
  std::string out = sign;
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<std::size_t>(n));
    out += '.';
    out += digits.substr(static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += (n - 1 >= 0) ? '+' : '-';
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// ISO-8601, as luxon's (and Backstage's identical) regular expression
//   ^-?P(?:(?:(N)Y)?(?:(N)M)?(?:(N)W)?(?:(N)D)?(?:T(?:(N)H)?(?:(N)M)?(?:(-?\d{1,20})(?:[.,](-?\d{1,20}))?S)?)?)$
//   N = -?\d{1,20}(?:\.\d{1,20})?
// matches it. Every component ends in its own designator letter, so a left-to-right scan decides the match
// without backtracking.

struct IsoMatch {
  // years, months, weeks, days, hours, minutes, seconds (integer part), seconds' fraction digits.
  std::array<std::optional<std::string_view>, 8> fields;
  bool has_minus = false;
};

// Reads -?\d{1,20} at pos; false if there is none. A 21st digit can never be followed by what the grammar
// needs next, so a longer run fails here as it fails the regular expression.
bool ReadDigits(std::string_view s, std::size_t& pos, bool allow_minus, bool& saw_minus) {
  if (allow_minus && pos < s.size() && s[pos] == '-') {
    saw_minus = true;
    ++pos;
  }
  std::size_t start = pos;
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  std::size_t count = pos - start;
  return count >= 1 && count <= 20;
}

std::optional<IsoMatch> MatchIso(std::string_view s) {
  IsoMatch m;
  std::size_t pos = 0;
  if (pos < s.size() && s[pos] == '-') {
    m.has_minus = true;
    ++pos;
  }
  if (pos >= s.size() || s[pos] != 'P') return std::nullopt;
  ++pos;
  // Date part: Y M W D, each at most once and in that order.
  int next_slot = 0;
  while (pos < s.size() && s[pos] != 'T') {
    std::size_t start = pos;
    if (!ReadDigits(s, pos, true, m.has_minus)) return std::nullopt;
    if (pos < s.size() && s[pos] == '.') {
      ++pos;
      bool unused = false;
      if (!ReadDigits(s, pos, false, unused)) return std::nullopt;
    }
    if (pos >= s.size()) return std::nullopt;
    int slot = -1;
    switch (s[pos]) {
      case 'Y':
        slot = 0;
        break;
      case 'M':
        slot = 1;
        break;
      case 'W':
        slot = 2;
        break;
      case 'D':
        slot = 3;
        break;
      default:
        return std::nullopt;
    }
    if (slot < next_slot) return std::nullopt;
    m.fields[static_cast<std::size_t>(slot)] = s.substr(start, pos - start);
    next_slot = slot + 1;
    ++pos;
  }
  if (pos < s.size()) {  // s[pos] == 'T'
    ++pos;
    int next_time_slot = 0;  // H M S
    while (pos < s.size()) {
      std::size_t start = pos;
      if (!ReadDigits(s, pos, true, m.has_minus)) return std::nullopt;
      std::size_t int_end = pos;
      std::optional<std::string_view> fraction;
      char separator = 0;
      bool fraction_minus = false;
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
        separator = s[pos++];
        std::size_t frac_start = pos;
        if (!ReadDigits(s, pos, true, fraction_minus)) return std::nullopt;
        fraction = s.substr(frac_start, pos - frac_start);
      }
      if (pos >= s.size()) return std::nullopt;
      int slot = -1;
      switch (s[pos]) {
        case 'H':
          slot = 0;
          break;
        case 'M':
          slot = 1;
          break;
        case 'S':
          slot = 2;
          break;
        default:
          return std::nullopt;
      }
      if (slot < next_time_slot) return std::nullopt;
      if (slot < 2 && fraction && (separator != '.' || fraction_minus)) return std::nullopt;
      if (slot < 2) {
        m.fields[static_cast<std::size_t>(4 + slot)] = s.substr(start, pos - start);
      } else {
        m.fields[6] = s.substr(start, int_end - start);
        if (fraction) {
          m.fields[7] = fraction;
          if (fraction_minus) m.has_minus = true;
        }
      }
      next_time_slot = slot + 1;
      ++pos;
    }
  }
  return m;
}

// luxon's parseMillis: the fraction digits as whole milliseconds, truncated.
double ParseMillis(std::string_view fraction) {
  std::string text = "0.";
  text += fraction;
  return std::floor(ParseDecimal(text) * 1000);
}

// The units luxon's extractISODuration yields for a match without any minus sign.
HumanDuration IsoUnits(const IsoMatch& m) {
  HumanDuration h;
  std::array<std::optional<double>*, 7> slots = {&h.years, &h.months,  &h.weeks,  &h.days,
                                                 &h.hours, &h.minutes, &h.seconds};
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (m.fields[i]) *slots[i] = ParseDecimal(*m.fields[i]);
  }
  if (m.fields[7]) h.milliseconds = ParseMillis(*m.fields[7]);
  return h;
}

// ---------------------------------------------------------------------------------------------------------------
// The `ms` library (v2): ^(-?(?:\d+)?\.?\d+) *(unit)?$ (case-insensitive), at most 100 characters.

// Milliseconds per unit for the `ms` unit names, or nullopt.
std::optional<double> MsUnit(std::string_view unit) {
  std::string lower;
  for (char c : unit) lower.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
  struct Entry {
    std::string_view name;
    double ms;
  };
  static constexpr std::array<Entry, 28> kUnits = {{
      {"years", kMsYear},     {"year", kMsYear},      {"yrs", kMsYear},      {"yr", kMsYear},
      {"y", kMsYear},         {"weeks", kMsWeek},     {"week", kMsWeek},     {"w", kMsWeek},
      {"days", kMsDay},       {"day", kMsDay},        {"d", kMsDay},         {"hours", kMsHour},
      {"hour", kMsHour},      {"hrs", kMsHour},       {"hr", kMsHour},       {"h", kMsHour},
      {"minutes", kMsMinute}, {"minute", kMsMinute},  {"mins", kMsMinute},   {"min", kMsMinute},
      {"m", kMsMinute},       {"seconds", kMsSecond}, {"second", kMsSecond}, {"secs", kMsSecond},
      {"sec", kMsSecond},     {"s", kMsSecond},       {"milliseconds", 1.0}, {"millisecond", 1.0},
  }};
  for (const Entry& e : kUnits) {
    if (e.name == lower) return e.ms;
  }
  if (lower == "msecs" || lower == "msec" || lower == "ms") return 1.0;
  return std::nullopt;
}

// Reads the `ms` number -?(?:\d+)?\.?\d+ at pos (i.e. -?\d+ or -?\d*\.\d+); its text, or nullopt.
std::optional<std::string_view> ReadMsNumber(std::string_view s, std::size_t& pos) {
  std::size_t start = pos;
  if (pos < s.size() && s[pos] == '-') ++pos;
  std::size_t int_start = pos;
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  bool has_int = pos > int_start;
  if (pos < s.size() && s[pos] == '.') {
    std::size_t frac_start = pos + 1;
    std::size_t p = frac_start;
    while (p < s.size() && IsDigit(s[p])) ++p;
    if (p > frac_start) {
      pos = p;
      return s.substr(start, pos - start);
    }
    // "1." has no digit after the point: the number stops before it (and the grammar then fails on the '.').
  }
  if (!has_int) {
    pos = start;
    return std::nullopt;
  }
  return s.substr(start, pos - start);
}

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// ms(text): milliseconds, or nullopt where ms returns undefined.
std::optional<double> MsParse(std::string_view s) {
  if (s.size() > 100) return std::nullopt;
  std::size_t pos = 0;
  std::optional<std::string_view> number = ReadMsNumber(s, pos);
  if (!number) return std::nullopt;
  while (pos < s.size() && s[pos] == ' ') ++pos;
  double n = ParseDecimal(*number);
  if (pos == s.size()) return n;  // no unit: milliseconds
  std::optional<double> unit = MsUnit(s.substr(pos));
  if (!unit) return std::nullopt;
  return n * *unit;
}

// octop's superset: two or more `<number> *<unit>` tokens, each with a unit, separated by spaces and at most
// one comma ('1h 30m', '1h30m', '2 days, 3 hours'); the sum of the tokens in milliseconds. Sets saw_negative
// if a token is negative.
std::optional<double> CompoundParse(std::string_view s, bool& saw_negative) {
  std::size_t pos = 0;
  double total = 0;
  int tokens = 0;
  while (pos < s.size()) {
    if (tokens > 0) {
      while (pos < s.size() && s[pos] == ' ') ++pos;
      if (pos < s.size() && s[pos] == ',') ++pos;
      while (pos < s.size() && s[pos] == ' ') ++pos;
      if (pos == s.size()) return std::nullopt;  // trailing separator
    }
    std::optional<std::string_view> number = ReadMsNumber(s, pos);
    if (!number) return std::nullopt;
    while (pos < s.size() && s[pos] == ' ') ++pos;
    std::size_t unit_start = pos;
    while (pos < s.size() && IsAsciiLetter(s[pos])) ++pos;
    std::optional<double> unit = MsUnit(s.substr(unit_start, pos - unit_start));
    if (!unit) return std::nullopt;
    double n = ParseDecimal(*number);
    if (number->front() == '-') saw_negative = true;
    total += n * *unit;
    ++tokens;
  }
  if (tokens < 2) return std::nullopt;
  return total;
}

// Backstage's greedy split of a positive number of milliseconds (parseMsDuration), same floating-point steps.
HumanDuration SplitMilliseconds(double ms) {
  HumanDuration h;
  struct Step {
    double size;
    std::optional<double> HumanDuration::*field;
  };
  const std::array<Step, 6> steps = {{{kMsYear, &HumanDuration::years},
                                      {kMsWeek, &HumanDuration::weeks},
                                      {kMsDay, &HumanDuration::days},
                                      {kMsHour, &HumanDuration::hours},
                                      {kMsMinute, &HumanDuration::minutes},
                                      {kMsSecond, &HumanDuration::seconds}}};
  for (const Step& step : steps) {
    if (ms >= step.size) {
      double count = std::floor(ms / step.size);
      ms -= count * step.size;
      h.*(step.field) = count;
    }
  }
  if (ms > 0) h.milliseconds = ms;
  return h;
}

std::string QuoteForMessage(std::string_view key, std::string_view value) {
  std::string out = "Invalid duration '";
  out += value;
  out += "'";
  if (!key.empty()) {
    out += " in config at '";
    out += key;
    out += "'";
  }
  return out;
}

// The fields of a HumanDuration with their names, in luxon's order.
struct NamedField {
  std::string_view name;
  std::optional<double> HumanDuration::*field;
};
constexpr std::array<NamedField, 8> kFields = {{{"years", &HumanDuration::years},
                                                {"months", &HumanDuration::months},
                                                {"weeks", &HumanDuration::weeks},
                                                {"days", &HumanDuration::days},
                                                {"hours", &HumanDuration::hours},
                                                {"minutes", &HumanDuration::minutes},
                                                {"seconds", &HumanDuration::seconds},
                                                {"milliseconds", &HumanDuration::milliseconds}}};

// {"minutes":90,"seconds":1.5}, as JSON.stringify prints a HumanDuration (non-finite values as JavaScript
// names them, for the error messages).
std::string HumanToString(const HumanDuration& h) {
  std::string out = "{";
  for (const NamedField& f : kFields) {
    const std::optional<double>& v = h.*(f.field);
    if (!v) continue;
    if (out.size() > 1) out += ',';
    out += '"';
    out += f.name;
    out += "\":";
    out += JsNumberToString(*v);
  }
  out += '}';
  return out;
}

// JavaScript's Number(text) for an already-trimmed, non-empty string: decimal literals with sign and
// exponent, 0x/0o/0b integers, Infinity; NaN otherwise.
double JsStringToNumber(std::string_view s) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (s.size() > 2 && s[0] == '0' &&
      (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    double value = 0;
    for (char c : s.substr(2)) {
      int digit = IsDigit(c)               ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : 99;
      if (digit >= base) return kNaN;
      value = value * base + digit;
    }
    return value;
  }
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "Infinity")
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  // [digits][.digits] with at least one digit, then optional exponent.
  std::size_t pos = 0, digits = 0;
  while (pos < body.size() && IsDigit(body[pos])) ++pos, ++digits;
  if (pos < body.size() && body[pos] == '.') {
    ++pos;
    while (pos < body.size() && IsDigit(body[pos])) ++pos, ++digits;
  }
  if (digits == 0) return kNaN;
  if (pos < body.size() && (body[pos] == 'e' || body[pos] == 'E')) {
    ++pos;
    if (pos < body.size() && (body[pos] == '+' || body[pos] == '-')) ++pos;
    std::size_t exp_start = pos;
    while (pos < body.size() && IsDigit(body[pos])) ++pos;
    if (pos == exp_start) return kNaN;
  }
  if (pos != body.size()) return kNaN;
  double value = 0;
  std::string text(body);
  if (!text.empty() && text[0] == '.') text.insert(text.begin(), '0');  // from_chars wants a leading digit
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // JavaScript gives Infinity or 0 where from_chars reports a range error.
    bool huge = text.find_first_of("eE") != std::string::npos && text.find("e-") == std::string::npos &&
                text.find("E-") == std::string::npos;
    value = huge ? std::numeric_limits<double>::infinity() : 0.0;
  }
  (void)ptr;
  return negative ? -value : value;
}

std::string_view JsTypeName(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return v.get_ref<const std::string&>().empty() ? "empty-string" : "string";
  return "unknown";
}

}  // namespace

Result<Duration> Duration::ParseIso(std::string_view text) {
  std::optional<IsoMatch> m = MatchIso(text);
  if (!m) {
    return InvalidArgumentError("Invalid duration, unparsable: the input \"" + std::string(text) +
                                "\" can't be parsed as ISO 8601");
  }
  if (m->has_minus) {
    return InvalidArgumentError("Invalid duration, negative: the input \"" + std::string(text) +
                                "\" has a minus sign; negative durations are not allowed");
  }
  return Duration(IsoUnits(*m));
}

Result<Duration> Duration::ParseConfigString(std::string_view text, std::string_view key) {
  const std::string_view value = text::JsTrim(text);
  auto fail = [&](std::string_view reason) {
    return InvalidArgumentError(QuoteForMessage(key, value) + ", Error: " + std::string(reason));
  };
  if (!value.empty() && value.front() == 'P') {
    std::optional<IsoMatch> m = MatchIso(value);
    if (!m) return fail(kBadIsoFormat);
    bool any = false;
    for (const auto& f : m->fields) any = any || f.has_value();
    if (!any) return fail(kNoIsoValues);
    if (m->has_minus) return fail(kNegative);
    // Backstage keeps only the non-zero units, and {milliseconds: 0} when none is left.
    HumanDuration parsed = IsoUnits(*m), kept;
    for (const NamedField& f : kFields) {
      const std::optional<double>& v = parsed.*(f.field);
      if (v && *v != 0) kept.*(f.field) = *v;
    }
    bool none = true;
    for (const NamedField& f : kFields) none = none && !(kept.*(f.field)).has_value();
    if (none) kept.milliseconds = 0;
    return Duration(kept);
  }
  if (value.empty()) return fail("val is not a non-empty string or a valid number. val=\"\"");
  bool all_digits = true;
  for (char c : value) all_digits = all_digits && IsDigit(c);
  if (all_digits) return fail(kPlainNumber);
  std::optional<double> ms = MsParse(value);
  if (!ms) {
    bool saw_negative = false;
    ms = CompoundParse(value, saw_negative);
    if (ms && saw_negative) return fail(kNegative);
  }
  if (!ms || !std::isfinite(*ms)) return fail(kNotADurationString);
  if (*ms < 0) return fail(kNegative);
  if (*ms == 0) {
    HumanDuration zero;
    zero.milliseconds = 0;
    return Duration(zero);
  }
  return Duration(SplitMilliseconds(*ms));
}

Result<Duration> Duration::ParseConfigValue(const nlohmann::json& value, std::string_view key,
                                            std::string_view context) {
  const std::string key_text(key), context_text(context);
  const std::string read_prefix = "Failed to read duration from config, ";
  if (value.is_string() && !value.get_ref<const std::string&>().empty()) {
    return ParseConfigString(value.get_ref<const std::string&>(), key);
  }
  if (value.is_null()) {
    return InvalidArgumentError(read_prefix + "Error: Missing required config value at '" + key_text +
                                "' in '" + context_text + "'");
  }
  if (!value.is_object()) {
    return InvalidArgumentError(read_prefix + "TypeError: Invalid type in config for key '" + key_text +
                                "' in '" + context_text + "', got " + std::string(JsTypeName(value)) +
                                ", wanted object");
  }
  HumanDuration human;
  bool found = false;
  for (const NamedField& f : kFields) {
    auto it = value.find(std::string(f.name));
    if (it == value.end() || it->is_null()) continue;
    const std::string full_key = key_text + "." + std::string(f.name);
    double number = 0;
    if (it->is_number()) {
      number = it->get<double>();
    } else if (it->is_string()) {
      std::string_view trimmed = text::JsTrim(it->get_ref<const std::string&>());
      number = trimmed.empty() ? std::numeric_limits<double>::quiet_NaN() : JsStringToNumber(trimmed);
      if (!std::isfinite(number)) {
        return InvalidArgumentError(read_prefix + "Error: Unable to convert config value for key '" +
                                    full_key + "' in '" + context_text + "' to a number");
      }
    } else {
      return InvalidArgumentError(read_prefix + "TypeError: Invalid type in config for key '" + full_key +
                                  "' in '" + context_text + "', got " + std::string(JsTypeName(*it)) +
                                  ", wanted number");
    }
    human.*(f.field) = number;
    found = true;
  }
  const std::string at_prefix = "Failed to read duration from config at '" + key_text + "', Error: ";
  if (!found) return InvalidArgumentError(at_prefix + "Needs one or more of " + std::string(kPropList));
  std::vector<std::string> unknown;
  for (auto it = value.begin(); it != value.end(); ++it) {
    bool known = false;
    for (const NamedField& f : kFields) known = known || f.name == it.key();
    if (!known) unknown.push_back("'" + it.key() + "'");
  }
  if (!unknown.empty()) {
    std::string list;
    for (const std::string& u : unknown) list += (list.empty() ? "" : ", ") + u;
    return InvalidArgumentError(at_prefix + "Unknown " + (unknown.size() == 1 ? "property " : "properties ") +
                                list + "; expected one or more of " + std::string(kPropList));
  }
  Result<Duration> duration = FromHuman(human);
  if (!duration.ok()) return InvalidArgumentError(at_prefix + duration.status().message());
  return duration;
}

Result<Duration> Duration::FromHuman(const HumanDuration& human) {
  HumanDuration units = human;
  for (const NamedField& f : kFields) {
    std::optional<double>& v = units.*(f.field);
    if (!v) continue;
    if (!std::isfinite(*v)) {
      return InvalidArgumentError("Invalid duration " + HumanToString(human) + ", Invalid unit value " +
                                  JsNumberToString(*v) + " for '" + std::string(f.name) + "'");
    }
    if (*v < 0) {
      return InvalidArgumentError("Invalid duration " + HumanToString(human) + ", " + std::string(kNegative) +
                                  " ('" + std::string(f.name) + "' is " + JsNumberToString(*v) + ")");
    }
    if (*v == 0) *v = 0.0;  // -0 and 0 print and compare alike
  }
  return Duration(units);
}

Duration Duration::FromMilliseconds(std::int64_t ms) {
  assert(ms >= 0 && "Duration::FromMilliseconds of a negative count");
  HumanDuration units;
  units.milliseconds = static_cast<double>(ms < 0 ? 0 : ms);
  return Duration(units);
}

std::string Duration::ToIso() const {
  auto get = [](const std::optional<double>& v) { return v.value_or(0.0); };
  const double years = get(units_.years), months = get(units_.months), weeks = get(units_.weeks),
               days = get(units_.days), hours = get(units_.hours), minutes = get(units_.minutes),
               seconds = get(units_.seconds), millis = get(units_.milliseconds);
  std::string s = "P";
  if (years != 0) s += JsNumberToString(years) + "Y";
  if (months != 0) s += JsNumberToString(months) + "M";
  if (weeks != 0) s += JsNumberToString(weeks) + "W";
  if (days != 0) s += JsNumberToString(days) + "D";
  if (hours != 0 || minutes != 0 || seconds != 0 || millis != 0) s += "T";
  if (hours != 0) s += JsNumberToString(hours) + "H";
  if (minutes != 0) s += JsNumberToString(minutes) + "M";
  if (seconds != 0 || millis != 0)
    s += JsNumberToString(JsRound((seconds + millis / 1000) * 1000) / 1000) + "S";
  if (s == "P") s += "T0S";
  return s;
}

double Duration::AsSeconds() const {
  // luxon's shiftTo('seconds'): larger units are boiled down first, in order, then the seconds themselves;
  // the integer part is kept and the fraction re-added (in luxon's (x*1000 - i*1000)/1000 form); milliseconds
  // last.
  double own = 0;
  const std::array<std::pair<const std::optional<double>*, double>, 6> larger = {
      {{&units_.years, kSecYear},
       {&units_.months, kSecMonth},
       {&units_.weeks, kSecWeek},
       {&units_.days, kSecDay},
       {&units_.hours, kSecHour},
       {&units_.minutes, kSecMinute}}};
  for (const auto& [value, factor] : larger) {
    if (*value) own += factor * **value;
  }
  if (units_.seconds) own += *units_.seconds;
  double integer = std::trunc(own);
  double result = integer;
  double fraction = (own * 1000 - integer * 1000) / 1000;
  if (fraction != 0) result += fraction;
  if (units_.milliseconds && *units_.milliseconds != 0) result += *units_.milliseconds / 1000;
  return result;
}

std::chrono::microseconds Duration::ToChrono() const {
  double micros = std::round(AsSeconds() * 1e6);
  constexpr double kMax = 9.2e18;  // just under INT64_MAX, which a double cannot hold exactly
  if (!(micros < kMax)) return std::chrono::microseconds::max();
  if (micros <= 0) return std::chrono::microseconds(0);
  return std::chrono::microseconds(static_cast<std::int64_t>(micros));
}

bool Duration::IsZero() const { return AsSeconds() == 0; }

bool operator==(const Duration& a, const Duration& b) {
  for (const NamedField& f : kFields) {
    double x = (a.units_.*(f.field)).value_or(0.0);
    double y = (b.units_.*(f.field)).value_or(0.0);
    if (x != y) return false;
  }
  return true;
}

}  // namespace octop
