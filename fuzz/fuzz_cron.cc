// libFuzzer target for CronExpression: any bytes go to Parse(); a valid expression is then searched from a
// few instants (including ones next to DST transitions) in a few zones, under each DST policy. Next() must
// either fail with a Status or return a whole second strictly after the start -- never crash, hang, or go
// backwards; a wall-clock policy never answers Internal.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <octop/cron.h>

namespace {

constexpr std::string_view kZones[] = {"UTC",
                                       "Europe/Paris",
                                       "America/New_York",
                                       "Australia/Lord_Howe",
                                       "America/Santiago",
                                       "Antarctica/Troll",
                                       "Pacific/Apia"};
constexpr std::string_view kPolicies[] = {"backstage", "shift,once", "shift,twice", "skip,once",
                                          "skip,twice"};

// ms since the epoch: ordinary days, the edges of DST transitions (Paris and New York spring/fall 2024, Lord
// Howe October 2024, Santiago September 2024), a leap day, and a far-future instant past the zone files' last
// explicit transition.
constexpr int64_t kStarts[] = {
    1704067200000,  // 2024-01-01T00:00:00Z
    1711846799500,  // 2024-03-31T00:59:59.5Z, just before Paris springs forward
    1729990800000,  // 2024-10-27T01:00:00Z, Paris falls back
    1710054000000,  // 2024-03-10T07:00:00Z, New York springs forward
    1730613600001,  // 2024-11-03T06:00:00.001Z, New York falls back
    1728140400000,  // 2024-10-05T15:00:00Z, Lord Howe springs forward 30 minutes
    1725764400000,  // 2024-09-08T03:00:00Z, Santiago skips 24:00-01:00
    1709164800000,  // 2024-02-29T00:00:00Z
    2524607999999,  // 2049-12-31T23:59:59.999Z
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto expression = octop::CronExpression::Parse(text);
  if (!expression.ok()) return 0;
  // Two bytes of the input choose the instants and zones, so the fuzzer can steer them too.
  const size_t pick = size > 0 ? data[0] : 0;
  for (size_t i = 0; i < 3; ++i) {
    const int64_t start_ms = kStarts[(pick + i * 3) % std::size(kStarts)];
    const std::string_view zone = kZones[(pick / 9 + i) % std::size(kZones)];
    const octop::WallTime after{std::chrono::milliseconds(start_ms)};
    const octop::DstPolicy policy =
        octop::DstPolicy::Parse(kPolicies[(pick / 63 + i) % std::size(kPolicies)]).value();
    auto next = expression->Next(after, zone, policy);
    if (!next.ok()) {
      if (policy.wall_clock && next.status().code() == octop::StatusCode::kInternal) std::abort();
      continue;
    }
    if (*next <= after) std::abort();
    if (next->time_since_epoch() % std::chrono::seconds(1) != octop::WallTime::duration::zero()) std::abort();
    if (*next - after > std::chrono::hours(24 * 366 * 9)) std::abort();  // beyond the 8-year horizon
  }
  return 0;
}
