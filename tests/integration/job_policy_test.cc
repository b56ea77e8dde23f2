// Pure parts of the job queue: the backoff formula, and the REST layer's parsing of POST bodies and instants.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <octop/queue.h>

#include "http/job_routes.h"

namespace octop {
namespace {

using namespace std::chrono_literals;

TEST(RetryPolicy, DoublesFromTheBaseUpToTheCap) {
  RetryPolicy p{.base = 1000ms, .cap = 10000ms, .jitter = 0};
  EXPECT_EQ(p.Delay(1, 0.7), 1000ms);
  EXPECT_EQ(p.Delay(2, 0.7), 2000ms);
  EXPECT_EQ(p.Delay(3, 0.7), 4000ms);
  EXPECT_EQ(p.Delay(4, 0.7), 8000ms);
  EXPECT_EQ(p.Delay(5, 0.7), 10000ms);
  EXPECT_EQ(p.Delay(500, 0.7), 10000ms);  // no overflow for absurd attempts
  EXPECT_EQ(p.Delay(0, 0.7), 1000ms);     // attempt < 1 counts as the first
}

TEST(RetryPolicy, JitterSpreadsSymmetricallyAroundTheDelay) {
  RetryPolicy p{.base = 1000ms, .cap = 1h, .jitter = 0.2};
  EXPECT_EQ(p.Delay(1, 0.0), 800ms);
  EXPECT_EQ(p.Delay(1, 0.5), 1000ms);
  EXPECT_EQ(p.Delay(1, 0.999999), 1200ms);
  EXPECT_EQ(p.Delay(3, 0.0), 3200ms);
  RetryPolicy wild{.base = 1000ms, .cap = 1h, .jitter = 7};  // clamped to 1: never negative
  EXPECT_EQ(wild.Delay(1, 0.0), 0ms);
}

TEST(JobStatusNames, RoundTrip) {
  for (JobStatus s : {JobStatus::kPending, JobStatus::kRunning, JobStatus::kSuccess, JobStatus::kFailed,
                      JobStatus::kFrozen}) {
    EXPECT_EQ(ParseJobStatus(JobStatusName(s)), s);
  }
  EXPECT_EQ(JobStatusName(JobStatus::kFrozen), "frozen");
  EXPECT_FALSE(ParseJobStatus("done").has_value());
}

TEST(IsoInstant, ParsesOffsetsAndFractions) {
  using http::ParseIsoInstant;
  const WallTime epoch_2026 = WallTime(std::chrono::seconds(1767225600));  // 2026-01-01T00:00:00Z
  EXPECT_EQ(ParseIsoInstant("2026-01-01T00:00:00Z"), epoch_2026);
  EXPECT_EQ(ParseIsoInstant("2026-01-01T01:30:00+01:30"), epoch_2026);
  EXPECT_EQ(ParseIsoInstant("2025-12-31T19:00:00-0500"), epoch_2026);
  EXPECT_EQ(ParseIsoInstant("2026-01-01T00:00Z"), epoch_2026);
  EXPECT_EQ(ParseIsoInstant("2026-01-01T00:00:00.250Z"), epoch_2026 + 250ms);
  EXPECT_EQ(http::FormatUtcIso(epoch_2026 + 250ms), "2026-01-01T00:00:00.250Z");
  for (const char* bad :
       {"", "2026-01-01", "2026-01-01T00:00:00", "2026-02-30T00:00:00Z", "2026-01-01T25:00:00Z",
        "2026-01-01T00:00:00+25:00", "2026-01-01T00:00:00Zjunk", "tomorrow", "2026-01-01T00:00:00.Z",
        "2999-01-01T00:00:00Z", "1969-12-31T23:59:59Z"}) {
    EXPECT_FALSE(ParseIsoInstant(bad).has_value()) << bad;
  }
}

TEST(JobSpecFromJson, ReadsEveryField) {
  auto spec = http::JobSpecFromJson(R"({"kind":"mail","payload":{"to":"a@b"},"queue":"outbox","priority":-3,
    "scheduledAt":"2026-01-01T00:00:00Z","maxRetries":0,"uniqueKey":"mail-1"})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, "mail");
  EXPECT_EQ(nlohmann::json::parse(spec->payload), nlohmann::json::parse(R"({"to":"a@b"})"));
  EXPECT_EQ(spec->queue, "outbox");
  EXPECT_EQ(spec->priority, -3);
  EXPECT_EQ(spec->scheduled_at, WallTime(std::chrono::seconds(1767225600)));
  EXPECT_EQ(spec->max_retries, 0);
  EXPECT_EQ(spec->unique_key, "mail-1");

  auto minimal = http::JobSpecFromJson(R"({"kind":"k"})");
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(minimal->payload, "{}");
  EXPECT_EQ(minimal->queue, "default");
  EXPECT_EQ(minimal->max_retries, 3);
  EXPECT_FALSE(minimal->scheduled_at.has_value());
}

TEST(JobSpecFromJson, ThePayloadIsItsTextAsSentCompacted) {
  // nlohmann::json would hold these as doubles: 1.2345678901234568e+28 and 0.1234567890123456
  // (core/json_text.h).
  auto spec = http::JobSpecFromJson(
      "{\"payload\" : [ 12345678901234567890123456789 , 0.12345678901234567890 , 1.50 , 1E+2 , \"a  b\" ] ,"
      " \"kind\":\"k\"}");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->payload, R"([12345678901234567890123456789,0.12345678901234567890,1.50,1E+2,"a  b"])");
  // The payload the parser would see: the last of repeated keys, a key spelled with an escape.
  auto repeated = http::JobSpecFromJson(R"({"kind":"k","payload":1,"p\u0061yload":{"x":2}})");
  ASSERT_TRUE(repeated.ok()) << repeated.status().ToString();
  EXPECT_EQ(repeated->payload, R"({"x":2})");
  auto null_payload = http::JobSpecFromJson(R"({"kind":"k","payload":null})");
  ASSERT_TRUE(null_payload.ok());
  EXPECT_EQ(null_payload->payload, "null");
}

TEST(JobSpecFromJson, NamesTheBadField) {
  struct Case {
    const char* body;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "Request body is not valid JSON"},
           {R"({"kind":x})", "Request body is not valid JSON: parse error at line 1, column 9"},
           {R"({"kind":"k","priority":1e400})", "Request body is not valid JSON: number overflow"},
           {"[1]", "Request body must be a JSON object"},
           {R"({"payload":{}})", "'kind' is required"},
           {R"({"kind":""})", "'kind' must not be empty"},
           {R"({"kind":7})", "'kind' must be a string"},
           {R"({"kind":"k","priority":"high"})", "'priority' must be an integer, got \"high\""},
           {R"({"kind":"k","maxRetries":-1})", "'maxRetries' must be between 0 and 1000, got -1"},
           {R"({"kind":"k","maxRetries":1.5})", "'maxRetries' must be an integer, got 1.5"},
           {R"({"kind":"k","scheduledAt":"soon"})", "'scheduledAt' must be an ISO 8601 instant"},
           {R"({"kind":"k","uniqueKey":""})", "'uniqueKey' must not be empty"},
           {R"({"kind":"k","colour":"red"})", "Unknown field 'colour'"},
           {R"({"kind":"a\u0000b"})", "'kind' must not contain the character U+0000"},
           {R"({"kind":"k","uniqueKey":"\u0000"})", "'uniqueKey' must not contain the character U+0000"},
           {R"({"kind":"k","payload":{"a":"\u0000"}})", "'payload' contains the escape \\u0000"},
       }) {
    auto spec = http::JobSpecFromJson(c.body);
    ASSERT_FALSE(spec.ok()) << c.body;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(spec.status().message().find(c.message), std::string::npos)
        << c.body << " -> " << spec.status().message();
  }
  const std::string long_kind(256, 'k');
  auto too_long = http::JobSpecFromJson(R"({"kind":")" + long_kind + R"("})");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("longer than 255 bytes"), std::string::npos);
}

}  // namespace
}  // namespace octop
