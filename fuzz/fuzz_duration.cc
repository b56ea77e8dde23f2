// libFuzzer target for octop::Duration's parsers: ParseIso, ParseConfigString and ParseConfigValue must never
// crash or trip a sanitizer on any bytes, and what they accept must print and re-read consistently.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <octop/duration.h>

namespace {

void Fail(const char* what, std::string_view input, const std::string& detail) {
  std::fprintf(stderr, "fuzz_duration: %s\n  input: '%.*s'\n  %s\n", what, static_cast<int>(input.size()),
               input.data(), detail.c_str());
  std::abort();
}

// luxon prints numbers the way JavaScript does, and some of those its own ISO grammar refuses: exponent
// notation (P1e-8Y, PT1e+21S) and numbers with more than 20 integer or fraction digits
// (P100000000000000000000D). Those are the only ToIso outputs allowed not to re-parse.
bool OutsideIsoGrammar(const std::string& iso) {
  if (iso.find('e') != std::string::npos) return true;
  std::size_t run = 0;
  for (char c : iso) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    if (run > 20) return true;
  }
  return false;
}

bool CloseEnough(double a, double b) {
  if (a == b) return true;
  return std::fabs(a - b) <= 1e-9 * std::fmax(std::fabs(a), std::fabs(b));
}

void CheckRoundTrip(const octop::Duration& d, std::string_view input, const char* source) {
  const std::string iso = d.ToIso();
  octop::Result<octop::Duration> again = octop::Duration::ParseIso(iso);
  if (!again.ok()) {
    if (!OutsideIsoGrammar(iso)) Fail(source, input, "ToIso() '" + iso + "' does not re-parse");
    return;
  }
  // ToIso rounds seconds to milliseconds, so only durations whose seconds are whole milliseconds keep their
  // length exactly; luxon's ISO parser truncates the same way, so a re-parse never changes units above
  // seconds.
  const double before = d.AsSeconds(), after = again->AsSeconds();
  const auto& u = d.units();
  const double ms_part = u.seconds.value_or(0) * 1000 + u.milliseconds.value_or(0);
  const bool whole_ms = ms_part == std::floor(ms_part);
  if (whole_ms && !CloseEnough(before, after)) {
    Fail(source, input,
         "AsSeconds " + std::to_string(before) + " became " + std::to_string(after) + " via " + iso);
  }
  if (again->ToIso() != iso && whole_ms)
    Fail(source, input, "ToIso is not stable: " + iso + " -> " + again->ToIso());
  (void)d.ToChrono();
  if (before < 0 || std::isnan(before)) Fail(source, input, "negative or NaN length");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  octop::Result<octop::Duration> iso = octop::Duration::ParseIso(input);
  if (iso.ok()) {
    CheckRoundTrip(*iso, input, "ParseIso");
  } else if (iso.status().message().find(std::string(input)) == std::string::npos) {
    Fail("ParseIso error does not name the input", input, iso.status().message());
  }

  octop::Result<octop::Duration> config = octop::Duration::ParseConfigString(input, "frequency");
  if (config.ok()) {
    CheckRoundTrip(*config, input, "ParseConfigString");
  } else if (config.status().message().rfind("Invalid duration '", 0) != 0) {
    Fail("ParseConfigString error has the wrong shape", input, config.status().message());
  }

  // The same bytes as a JSON config value, when they are JSON (objects exercise the HumanDuration reader).
  nlohmann::json value = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) {
    octop::Result<octop::Duration> from_value = octop::Duration::ParseConfigValue(value, "frequency", "fuzz");
    if (from_value.ok()) CheckRoundTrip(*from_value, input, "ParseConfigValue");
  }
  return 0;
}
