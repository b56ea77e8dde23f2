#include <gtest/gtest.h>

#include <octop/task_settings.h>

namespace octop {
namespace {

TaskSettingsV2 Settings(std::string cadence, std::string timeout = "PT1M",
                        std::optional<std::string> delay = std::nullopt) {
  return {.cadence = std::move(cadence),
          .timeout_after_duration = std::move(timeout),
          .initial_delay_duration = std::move(delay),
          .time_zone = std::nullopt};
}

TEST(TaskSettings, JsonHasBackstageKeyOrderAndOmitsAbsentDelay) {
  EXPECT_EQ(
      Settings("PT10S", "PT1M", "PT10S").ToJson(),
      R"({"version":2,"cadence":"PT10S","initialDelayDuration":"PT10S","timeoutAfterDuration":"PT1M"})");
  EXPECT_EQ(Settings("* * * * * *", "PT1M").ToJson(),
            R"({"version":2,"cadence":"* * * * * *","timeoutAfterDuration":"PT1M"})");
}

TEST(TaskSettings, TimeZoneIsWrittenLast) {
  auto s = Settings("0 2 * * *", "PT1H");
  s.time_zone = "Europe/Paris";
  EXPECT_EQ(s.ToJson(),
            R"({"version":2,"cadence":"0 2 * * *","timeoutAfterDuration":"PT1H","timeZone":"Europe/Paris"})");
  auto back = TaskSettingsV2::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(TaskSettings, RoundTripsEveryCadenceKind) {
  for (const auto& s :
       {Settings("manual"), Settings("P1D", "PT3M", "PT2M"), Settings("*/2 * * * * *", "PT1M", "PT3S")}) {
    auto back = TaskSettingsV2::FromJson(s.ToJson());
    ASSERT_TRUE(back.ok()) << s.ToJson() << ": " << back.status().ToString();
    EXPECT_EQ(*back, s);
  }
}

TEST(TaskSettings, ClassifiesCadenceLikeTheRuntime) {
  EXPECT_EQ(Settings("manual").cadence_kind(), CadenceKind::kManual);
  EXPECT_EQ(Settings("PT5S").cadence_kind(), CadenceKind::kDuration);
  EXPECT_EQ(Settings("0 * * * *").cadence_kind(), CadenceKind::kCron);
  EXPECT_EQ(Settings("").cadence_kind(), CadenceKind::kCron);
}

TEST(TaskSettings, UnknownKeysAreDropped) {
  auto s =
      TaskSettingsV2::FromJson(R"({"version":2,"cadence":"PT5S","timeoutAfterDuration":"PT1M","extra":[1]})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ToJson(), R"({"version":2,"cadence":"PT5S","timeoutAfterDuration":"PT1M"})");
}

TEST(TaskSettings, VersionMustBeTheNumberTwo) {
  for (const char* json : {R"({"version":1,"cadence":"PT5S","timeoutAfterDuration":"PT1M"})",
                           R"({"version":"2","cadence":"PT5S","timeoutAfterDuration":"PT1M"})",
                           R"({"cadence":"PT5S","timeoutAfterDuration":"PT1M"})"}) {
    auto s = TaskSettingsV2::FromJson(json);
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("version"), std::string::npos) << s.status().message();
  }
  EXPECT_TRUE(
      TaskSettingsV2::FromJson(R"({"version":2.0,"cadence":"PT5S","timeoutAfterDuration":"PT1M"})").ok());
}

TEST(TaskSettings, V1RowsDoNotParse) {
  auto s = TaskSettingsV2::FromJson(
      R"({"version":1,"recurringAtMostEveryDuration":"PT5M","timeoutAfterDuration":"PT1M"})");
  EXPECT_FALSE(s.ok());
}

TEST(TaskSettings, RejectsMalformedJsonAndWrongTypes) {
  EXPECT_EQ(TaskSettingsV2::FromJson("{").status().message(), "Invalid task settings: not valid JSON");
  EXPECT_EQ(TaskSettingsV2::FromJson("[]").status().message(),
            "Invalid task settings: expected a JSON object");
  auto missing = TaskSettingsV2::FromJson(R"({"version":2,"cadence":"PT5S"})");
  EXPECT_EQ(missing.status().message(), "Invalid task settings: timeoutAfterDuration: Required");
  auto wrong = TaskSettingsV2::FromJson(R"({"version":2,"cadence":5,"timeoutAfterDuration":"PT1M"})");
  EXPECT_EQ(wrong.status().message(), "Invalid task settings: cadence: Expected string, received number");
}

TEST(TaskSettings, ValidationNamesTheBadField) {
  auto cadence = Settings("every tuesday").Validate();
  EXPECT_EQ(cadence.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cadence.message().find("cadence: 'every tuesday' is not valid: Invalid cron"), std::string::npos)
      << cadence.message();
  auto timeout = Settings("PT5S", "5 minutes").Validate();
  EXPECT_EQ(
      timeout.message(),
      "Invalid task settings: timeoutAfterDuration: '5 minutes': Invalid duration, expecting ISO Period");
  auto delay = Settings("PT5S", "PT1M", "soon").Validate();
  EXPECT_EQ(delay.message(),
            "Invalid task settings: initialDelayDuration: 'soon': Invalid duration, expecting ISO Period");
  EXPECT_FALSE(Settings("99 * * * *").Validate().ok());
  EXPECT_FALSE(Settings("PXYZ").Validate().ok());
}

TEST(TaskSettings, EmptyDurationsPassLikeBackstage) {
  // Backstage's duration refinement only checks truthy strings; the quirk is kept for compatibility.
  EXPECT_TRUE(Settings("", "").Validate().ok());
  EXPECT_TRUE(Settings("PT1S", "", "").Validate().ok());
}

TEST(TaskSettings, TimeZoneMustBeKnownAndOnlyOnCron) {
  auto s = Settings("0 2 * * *");
  s.time_zone = "Mars/Olympus_Mons";
  EXPECT_NE(s.Validate().message().find("unknown time zone 'Mars/Olympus_Mons'"), std::string::npos);
  s.time_zone = "America/New_York";
  EXPECT_TRUE(s.Validate().ok());
  auto d = Settings("PT5S");
  d.time_zone = "UTC";
  EXPECT_NE(d.Validate().message().find("only a cron cadence"), std::string::npos);
}

TEST(TaskSettings, DstPolicyIsWrittenAfterTheZoneAndChecked) {
  auto s = Settings("30 2 * * *", "PT1H");
  s.time_zone = "America/New_York";
  s.dst_policy = "skip,once";
  EXPECT_EQ(s.ToJson(), R"({"version":2,"cadence":"30 2 * * *","timeoutAfterDuration":"PT1H",)"
                        R"("timeZone":"America/New_York","dstPolicy":"skip,once"})");
  auto back = TaskSettingsV2::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  s.dst_policy = "skip";
  EXPECT_NE(s.Validate().message().find("dstPolicy"), std::string::npos) << s.Validate().ToString();
  EXPECT_NE(s.Validate().message().find("shift,once"), std::string::npos) << s.Validate().ToString();
  auto d = Settings("PT5S");
  d.dst_policy = "shift,once";
  EXPECT_NE(d.Validate().message().find("only a cron cadence takes a DST policy"), std::string::npos);
  EXPECT_FALSE(TaskSettingsV2::FromJson(R"({"version":2,"cadence":"0 2 * * *","timeoutAfterDuration":"PT1H",)"
                                        R"("dstPolicy":7})")
                   .ok());
}

}  // namespace
}  // namespace octop
