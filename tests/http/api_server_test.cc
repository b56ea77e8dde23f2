#include "http/api_server.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "http/task_json.h"

namespace octop::http {
namespace {

using Segments = std::vector<std::string>;

TEST(SplitPath, DecodesEachSegmentLikeExpress) {
  EXPECT_EQ(ApiServer::SplitPath("/api/demo/.backstage/scheduler/v1/tasks/a%2Fb/trigger?x=1"),
            (Segments{"api", "demo", ".backstage", "scheduler", "v1", "tasks", "a/b", "trigger"}));
  EXPECT_EQ(ApiServer::SplitPath("/tasks/gitea-provider:local:refresh"),
            (Segments{"tasks", "gitea-provider:local:refresh"}));
  EXPECT_EQ(ApiServer::SplitPath("/a+b/%E2%82%AC/"),
            (Segments{"a+b", "\xE2\x82\xAC"}));  // '+' is not a space
  EXPECT_EQ(ApiServer::SplitPath("/"), (Segments{""}));
}

TEST(SplitPath, RejectsMalformedEncodingNulAndInvalidUtf8) {
  EXPECT_FALSE(ApiServer::SplitPath("/%zz").has_value());
  EXPECT_FALSE(ApiServer::SplitPath("/abc%2").has_value());
  EXPECT_FALSE(ApiServer::SplitPath("/a%00b").has_value());
  EXPECT_FALSE(ApiServer::SplitPath(std::string("/a\0b", 4)).has_value());
  EXPECT_FALSE(ApiServer::SplitPath("/%FF").has_value());
  EXPECT_FALSE(ApiServer::SplitPath("/%C3").has_value());  // a truncated two-byte sequence
  EXPECT_FALSE(ApiServer::SplitPath("relative").has_value());
}

TEST(SecretsEqual, ComparesWholeSecrets) {
  EXPECT_TRUE(SecretsEqual("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(SecretsEqual("0123456789abcdeX", "0123456789abcdef"));
  EXPECT_FALSE(SecretsEqual("0123456789abcde", "0123456789abcdef"));
  EXPECT_FALSE(SecretsEqual("0123456789abcdef0", "0123456789abcdef"));
  EXPECT_FALSE(SecretsEqual("", "0123456789abcdef"));
}

TEST(TaskJson, FormatsLocalTimeLikeLuxon) {
  // The zone is read once per process; this test's expectations hold for UTC and for a +01:00/+02:00 zone
  // alike, so it checks the shape and the instant rather than one zone's digits.
  const WallTime t = std::chrono::sys_days{std::chrono::year{2025} / 4 / 11} + std::chrono::hours(18) +
                     std::chrono::minutes(35) + std::chrono::seconds(13) + std::chrono::milliseconds(418);
  const std::string text = FormatLocalIso(t);
  ASSERT_EQ(text.size(), 29u) << text;
  EXPECT_EQ(text.substr(10, 1), "T");
  EXPECT_EQ(text.substr(19, 4), ".418");
  EXPECT_TRUE(text[23] == '+' || text[23] == '-') << text;
}

TEST(TaskJson, ALocalTasksTimesAreUtcWithAZLikeLuxonsUtcDateTime) {
  const WallTime t = std::chrono::sys_days{std::chrono::year{2025} / 4 / 11} + std::chrono::hours(18) +
                     std::chrono::minutes(35) + std::chrono::seconds(13) + std::chrono::milliseconds(418);
  TaskStateEntry local{.task_id = "t",
                       .plugin_id = "p",
                       .scope = TaskScope::kLocal,
                       .settings = {.cadence = "PT5S", .timeout_after_duration = "PT1M"},
                       .task_state = TaskState{.status = TaskStatus::kIdle,
                                               .starts_at = t,
                                               .started_at = std::nullopt,
                                               .times_out_at = std::nullopt,
                                               .last_run_ended_at = t,
                                               .last_run_error = std::nullopt},
                       .worker_state = WorkerStatus::kIdle};
  OrderedJson j = TaskStateEntryToJson(local);
  EXPECT_EQ(j["taskState"]["startsAt"], "2025-04-11T18:35:13.418Z");
  EXPECT_EQ(j["taskState"]["lastRunEndedAt"], "2025-04-11T18:35:13.418Z");
}

// The process's zone comes from TZ when it is set, as luxon takes it. The zone is read once per process, so
// the check runs in a fresh one (a re-executed death-test child).
TEST(TaskJsonDeathTest, TheTzVariableSetsTheZoneOfGlobalTaskTimes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const WallTime t = std::chrono::sys_days{std::chrono::year{2025} / 4 / 11} + std::chrono::hours(18);
  EXPECT_EXIT(
      {
        ::setenv("TZ", "Asia/Tokyo", 1);
        std::exit(FormatLocalIso(t) == "2025-04-12T03:00:00.000+09:00" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(TaskJson, ErrorBodyHasBackstageShape) {
  OrderedJson body = ErrorBody(NotFoundError("Task x does not exist"), "POST", "/api/p/x");
  EXPECT_EQ(body.dump(), R"({"error":{"name":"NotFoundError","message":"Task x does not exist"},)"
                         R"("request":{"method":"POST","url":"/api/p/x"},"response":{"statusCode":404}})");
}

TEST(TaskJson, TaskStateShapesFollowTheStatus) {
  TaskStateEntry running{.task_id = "t",
                         .plugin_id = "p",
                         .scope = TaskScope::kGlobal,
                         .settings = {.cadence = "PT5S", .timeout_after_duration = "PT1M"},
                         .task_state = TaskState{.status = TaskStatus::kRunning,
                                                 .starts_at = WallTime{},
                                                 .started_at = WallTime{},
                                                 .times_out_at = WallTime{},
                                                 .last_run_ended_at = std::nullopt,
                                                 .last_run_error = R"({"name":"Error","message":"m"})"},
                         .worker_state = WorkerStatus::kRunning};
  OrderedJson j = TaskStateEntryToJson(running);
  EXPECT_EQ(j["taskState"]["status"], "running");
  EXPECT_TRUE(j["taskState"].contains("startedAt"));
  EXPECT_TRUE(j["taskState"].contains("timesOutAt"));
  EXPECT_FALSE(j["taskState"].contains("startsAt"));  // startsAt belongs to the idle shape only
  EXPECT_EQ(j["taskState"]["lastRunError"], R"({"name":"Error","message":"m"})");  // the raw JSON string
  EXPECT_EQ(j["workerState"]["status"], "running");

  TaskStateEntry gone = running;
  gone.task_state.reset();
  gone.worker_state.reset();
  OrderedJson g = TaskStateEntryToJson(gone);
  EXPECT_TRUE(g["taskState"].is_null());
  EXPECT_TRUE(g["workerState"].is_null());
  EXPECT_EQ(g["settings"].dump(), R"({"version":2,"cadence":"PT5S","timeoutAfterDuration":"PT1M"})");
}

}  // namespace
}  // namespace octop::http
