// The wall-clock DST policies (docs/cron.md, "DST policies"): examples at known transitions, and a property
// test over every zone of the system's tz database against a brute-force oracle that walks instants quarter
// hour by quarter hour (it shares no code with the search, which walks local days and times).
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <date/date.h>
#include <date/tz.h>
#include <gtest/gtest.h>

#include <octop/cron.h>

#include "iso_time.h"

namespace octop {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

DstPolicy Policy(const char* text) {
  Result<DstPolicy> policy = DstPolicy::Parse(text);
  EXPECT_TRUE(policy.ok()) << text;
  return policy.value_or(DstPolicy{});
}

// The fire times after `from`, in order.
std::vector<std::string> Fires(const char* expression, const char* zone, const char* policy, const char* from,
                               int n) {
  auto cron = CronExpression::Parse(expression);
  EXPECT_TRUE(cron.ok());
  std::vector<std::string> out;
  WallTime t = At(from);
  for (int i = 0; i < n; ++i) {
    Result<WallTime> next = cron->Next(t, zone, Policy(policy));
    if (!next.ok()) {
      out.push_back(next.status().ToString());
      break;
    }
    out.push_back(IsoSeconds(*next));
    t = *next;
  }
  return out;
}

TEST(DstPolicy, ParsesAndPrintsTheFivePolicies) {
  for (const char* text : {"backstage", "shift,once", "shift,twice", "skip,once", "skip,twice"}) {
    Result<DstPolicy> policy = DstPolicy::Parse(text);
    ASSERT_TRUE(policy.ok()) << text;
    EXPECT_EQ(policy->ToString(), text);
  }
  EXPECT_FALSE(DstPolicy::Parse("backstage").value().wall_clock);
  EXPECT_EQ(DstPolicy{}, DstPolicy::Parse("backstage").value());
  for (const char* bad : {"", "wall", "shift", "shift, once", "once,shift", "SKIP,ONCE", "skip,once,twice"}) {
    Result<DstPolicy> policy = DstPolicy::Parse(bad);
    ASSERT_FALSE(policy.ok()) << bad;
    EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(policy.status().message().find("shift,once"), std::string::npos) << policy.status().ToString();
  }
}

// New York springs forward on 2026-03-08 at 02:00 EST to 03:00 EDT: 02:30 does not exist that day.
TEST(DstPolicy, ASkippedTimeRunsAtTheEndOfTheGapOrNotAtAll) {
  EXPECT_EQ(
      Fires("30 2 * * *", "America/New_York", "shift,once", "2026-03-07T12:00:00Z", 3),
      (std::vector<std::string>{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}));
  EXPECT_EQ(Fires("30 2 * * *", "America/New_York", "skip,once", "2026-03-07T12:00:00Z", 2),
            (std::vector<std::string>{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}));
  // Every minute of the missing hour shifts to the same instant: it runs there once.
  EXPECT_EQ(
      Fires("* 2 * * *", "America/New_York", "shift,once", "2026-03-08T06:58:00Z", 3),
      (std::vector<std::string>{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:01:00Z"}));
}

// New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST: 01:00-01:59 happen twice.
TEST(DstPolicy, ARepeatedTimeRunsOnceOrTwice) {
  EXPECT_EQ(Fires("30 1 * * *", "America/New_York", "shift,once", "2026-10-31T12:00:00Z", 2),
            (std::vector<std::string>{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
  EXPECT_EQ(
      Fires("30 1 * * *", "America/New_York", "skip,twice", "2026-10-31T12:00:00Z", 3),
      (std::vector<std::string>{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}));
  // Hourly: once leaves the repeated hour out, twice runs it again; the package's walk skips 01:00 EST too.
  EXPECT_EQ(
      Fires("0 * * * *", "America/New_York", "shift,once", "2026-11-01T04:30:00Z", 3),
      (std::vector<std::string>{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}));
  EXPECT_EQ(
      Fires("0 * * * *", "America/New_York", "shift,twice", "2026-11-01T04:30:00Z", 3),
      (std::vector<std::string>{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}));
}

// Samoa skipped 2011-12-30 altogether (UTC-10 to UTC+14 at local midnight).
TEST(DstPolicy, ASkippedDayRunsWhenItEndsOrNotAtAll) {
  EXPECT_EQ(Fires("0 12 * * *", "Pacific/Apia", "shift,once", "2011-12-29T23:00:00Z", 2),
            (std::vector<std::string>{"2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"}));
  EXPECT_EQ(Fires("0 12 * * *", "Pacific/Apia", "skip,once", "2011-12-29T23:00:00Z", 1),
            (std::vector<std::string>{"2011-12-30T22:00:00Z"}));
}

TEST(DstPolicy, TheDefaultIsThePackagesWalk) {
  auto cron = CronExpression::Parse("0 * * * *");
  ASSERT_TRUE(cron.ok());
  const WallTime t = At("2026-11-01T05:30:00Z");
  EXPECT_EQ(cron->Next(t, "America/New_York").value(),
            cron->Next(t, "America/New_York", DstPolicy{}).value());
  // The package's walk leaves 01:00 EST out of an hourly schedule, as "once" does.
  EXPECT_EQ(IsoSeconds(cron->Next(t, "America/New_York").value()), "2026-11-01T07:00:00Z");
  // Nothing within the horizon is NotFound under every policy.
  auto never = CronExpression::Parse("0 0 30 2 *");
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(never->Next(t, "UTC", Policy("shift,once")).status().code(), StatusCode::kNotFound);
}

// ---- Every zone

// The brute-force oracle: walks instants a quarter hour at a time from `after` (offsets from the tz database
// with no cron code), and answers the first instant whose local time matches -- and that local time's first
// instant under `once` -- or, under `shift`, the end of a gap that swallowed a matching local time.
struct Oracle {
  const date::time_zone* zone;
  int minute;               // the expressions below: "M H * * *" or "M * * * *"
  std::optional<int> hour;  // nullopt: every hour
  DstPolicy policy;

  std::chrono::seconds OffsetAt(date::sys_seconds t) const { return zone->get_info(t).offset; }
  bool Matches(date::local_seconds local) const {
    const auto day = date::floor<date::days>(local);
    const date::hh_mm_ss<seconds> tod(local - day);
    return tod.minutes().count() == minute && tod.seconds().count() == 0 &&
           (!hour || tod.hours().count() == *hour);
  }
  std::optional<date::sys_seconds> Next(date::sys_seconds after, date::sys_seconds limit) const {
    // A quarter-hour grid (every expression below fires on it, and every offset since 2005 is a whole number
    // of quarter hours), and the zone's transitions, which may lie off it (Antarctica/Casey's at 00:01).
    using Quarters = std::chrono::duration<int64_t, std::ratio<900>>;
    std::vector<date::sys_seconds> candidates;
    for (auto t = date::ceil<Quarters>(after + seconds(1)); t <= limit; t += Quarters(1))
      candidates.push_back(t);
    for (date::sys_info info = zone->get_info(after); info.end <= limit; info = zone->get_info(info.end)) {
      candidates.push_back(info.end);
    }
    std::sort(candidates.begin(), candidates.end());
    for (const date::sys_seconds t : candidates) {
      const seconds offset = OffsetAt(t);
      const date::local_seconds local{t.time_since_epoch() + offset};
      // A gap just ended at t: the local times it swallowed lie in [local before t, local at t).
      const seconds before = OffsetAt(t - seconds(1));
      if (policy.gap == DstPolicy::Gap::kShift && before < offset) {
        for (auto l = date::ceil<minutes>(date::local_seconds{t.time_since_epoch() + before}); l < local;
             l += minutes(1)) {
          if (Matches(l)) return t;
        }
      }
      if (!Matches(local)) continue;
      if (policy.overlap == DstPolicy::Overlap::kOnce) {
        // A second occurrence: the same local time at an earlier instant, under a larger offset in force
        // within the 3 hours before.
        bool seen = false;
        for (date::sys_info info = zone->get_info(t - hours(3));; info = zone->get_info(info.end)) {
          const date::sys_seconds u{local.time_since_epoch() - info.offset};
          seen = u < t && u >= info.begin && u < info.end;
          if (seen || info.end >= t) break;
        }
        if (seen) continue;
      }
      return t;
    }
    return std::nullopt;
  }
};

TEST(DstPolicyEveryZone, AgreesWithAQuarterHourWalkAroundEveryZonesRecentTransitions) {
  const date::tzdb& db = date::get_tzdb();
  const date::sys_seconds from = date::sys_days(date::year(2005) / 1 / 1);
  const date::sys_seconds to = date::sys_days(date::year(2030) / 1 / 1);
  struct Expression {
    const char* text;
    int minute;
    std::optional<int> hour;
  };
  const Expression expressions[] = {
      {"30 * * * *", 30, std::nullopt}, {"0 2 * * *", 0, 2}, {"15 0 * * *", 15, 0}};
  const char* policies[] = {"shift,once", "shift,twice", "skip,once", "skip,twice"};
  int zones = 0;
  int checks = 0;
  for (const date::time_zone& zone : db.zones) {
    ++zones;
    // The zone's last two transitions in [2005, 2030): usually one spring-forward and one fall-back.
    std::vector<date::sys_seconds> transitions;
    for (date::sys_info info = zone.get_info(from); info.end < to; info = zone.get_info(info.end)) {
      transitions.push_back(info.end);
    }
    if (transitions.size() > 2) transitions.erase(transitions.begin(), transitions.end() - 2);
    for (const date::sys_seconds transition : transitions) {
      for (const Expression& e : expressions) {
        auto cron = CronExpression::Parse(e.text);
        ASSERT_TRUE(cron.ok());
        for (const char* policy_text : policies) {
          const DstPolicy policy = Policy(policy_text);
          const Oracle oracle{&zone, e.minute, e.hour, policy};
          for (const seconds before : {seconds(hours(3)), seconds(minutes(31)), seconds(1)}) {
            const date::sys_seconds after = transition - before;
            Result<WallTime> next = cron->Next(WallTime(after.time_since_epoch()), zone.name(), policy);
            ASSERT_TRUE(next.ok()) << zone.name() << " " << e.text << " " << policy_text << ": "
                                   << next.status().ToString();
            const date::sys_seconds got = date::floor<seconds>(*next);
            const std::optional<date::sys_seconds> want = oracle.Next(after, got);
            ASSERT_TRUE(want.has_value())
                << zone.name() << " '" << e.text << "' " << policy_text << " after "
                << IsoSeconds(WallTime(after.time_since_epoch())) << ": nothing up to " << IsoSeconds(*next);
            ASSERT_EQ(IsoSeconds(*next), IsoSeconds(WallTime(want->time_since_epoch())))
                << zone.name() << " '" << e.text << "' " << policy_text << " after "
                << IsoSeconds(WallTime(after.time_since_epoch()));
            ++checks;
          }
        }
      }
    }
  }
  EXPECT_GT(zones, 300);
  EXPECT_GT(checks, 10000);
  RecordProperty("zones", zones);
  RecordProperty("checks", checks);
}

}  // namespace
}  // namespace octop
