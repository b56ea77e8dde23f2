// Bad input: odd but valid ids round-trip exactly; invalid ids and settings are rejected before anything is
// written.
#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

using std::chrono::minutes;

TEST_P(StoreConformance, IdsWithQuotesPercentAndUnicodeRoundTrip) {
  const std::vector<std::string> ids = {"it's",          R"(say "hi")",
                                        "100%",          "a_b%c_",
                                        R"(back\slash)", "x'); DROP TABLE backstage_backend_tasks__tasks; --",
                                        "タスク-ü-ø",    "emoji-\xF0\x9F\x9A\x80",
                                        " padded ",      "slash/and%2Fencoded",
                                        "tab\tinside",   "semi;colon",
                                        "dollar$1$$"};
  for (const std::string& id : ids) AddTask(id, DbNowPlus{});
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_EQ(rows->size(), ids.size());
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    EXPECT_EQ(Row(id).id, id);
    auto polled = store_->PollTasks({.ids = {id}});
    OCTOP_ASSERT_OK(polled);
    ASSERT_EQ(polled->tasks.size(), 1u);
    EXPECT_EQ(polled->tasks[0].id, id);
    EXPECT_TRUE(Claim(id, "ticket-" + id).has_value());
    const Status trigger = store_->TriggerTask({.id = id});
    EXPECT_EQ(trigger.message(), "Task " + id + " is currently running");
    OCTOP_EXPECT_OK(store_->CancelTask({.id = id, .error_json = std::string(kCancelledError)}));
  }
  // LIKE-style wildcards match nothing but themselves.
  auto wildcard = store_->ListTasks({.ids = std::vector<std::string>{"%", "_", "100_"}});
  OCTOP_ASSERT_OK(wildcard);
  EXPECT_TRUE(wildcard->empty());
}

TEST_P(StoreConformance, IdOf255BytesIsAcceptedAnd256Rejected) {
  const std::string ok(255, 'a');
  AddTask(ok, DbNowPlus{});
  EXPECT_EQ(Row(ok).id, ok);
  const std::string multibyte = std::string(253, 'b') + "\xC3\xBC";  // 255 bytes, 254 characters
  AddTask(multibyte, DbNowPlus{});
  EXPECT_EQ(Row(multibyte).id, multibyte);
  for (const std::string& too_long :
       {std::string(256, 'a'), std::string(254, 'c') + "\xC3\xBC", std::string(10000, 'x')}) {
    const Status s = store_->UpsertTask({.id = too_long,
                                         .settings_json = std::string(kDurationSettings),
                                         .start_at = DbNowPlus{},
                                         .next_start_at = DbNowPlus{}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << too_long.size();
    EXPECT_NE(s.message().find("255"), std::string::npos) << s.message();
  }
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_EQ(rows->size(), 2u);
}

TEST_P(StoreConformance, EmptyAndWhitespaceIdsAreRejectedWithBackstagesMessage) {
  for (const std::string id : {"", " ", "\t\n", "\xC2\xA0", "\xE3\x80\x80 "}) {
    const Status s = store_->UpsertTask({.id = id,
                                         .settings_json = std::string(kDurationSettings),
                                         .start_at = DbNowPlus{},
                                         .next_start_at = DbNowPlus{}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), id + " is not a valid ID, expected non-empty string");
  }
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
}

TEST_P(StoreConformance, InvalidUtf8AndNulIdsAreRejected) {
  for (const std::string& id : {std::string("bad\xFF"), std::string("\xC3"), std::string("\xED\xA0\x80"),
                                std::string("\xC0\xAF"), std::string("nul\0inside", 10)}) {
    const Status s = store_->UpsertTask({.id = id,
                                         .settings_json = std::string(kDurationSettings),
                                         .start_at = DbNowPlus{},
                                         .next_start_at = DbNowPlus{}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
  // Reads with such ids simply find nothing.
  auto polled = store_->PollTasks({.ids = {"bad\xFF"}});
  OCTOP_ASSERT_OK(polled);
  EXPECT_TRUE(polled->tasks.empty());
}

TEST_P(StoreConformance, InvalidSettingsAreRejectedBeforeAnyWrite) {
  AddTask("a", DbNowPlus{minutes(30)});
  const TaskRow before = Row("a");
  const std::vector<std::string> bad = {
      "",
      "not json",
      R"({"version":2,"cadence":"PT1M")",
      R"({"version":1,"cadence":"PT1M","timeoutAfterDuration":"PT1M"})",
      R"({"version":"2","cadence":"PT1M","timeoutAfterDuration":"PT1M"})",
      R"({"version":2,"cadence":"every day","timeoutAfterDuration":"PT1M"})",
      R"({"version":2,"cadence":"PT1M"})",
      R"({"version":2,"cadence":"PT1M","timeoutAfterDuration":"soon"})",
      R"([1,2,3])",
  };
  for (const std::string& settings : bad) {
    SCOPED_TRACE(settings);
    Status s = store_->UpsertTask(
        {.id = "a", .settings_json = settings, .start_at = DbNowPlus{}, .next_start_at = DbNowPlus{}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    s = store_->UpsertTask(
        {.id = "new", .settings_json = settings, .start_at = DbNowPlus{}, .next_start_at = DbNowPlus{}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  const TaskRow after = Row("a");
  EXPECT_EQ(after.settings_json, before.settings_json);
  EXPECT_EQ(Show(after.next_run_start_at), Show(before.next_run_start_at));
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_EQ(rows->size(), 1u) << "no row for 'new'";
}

TEST_P(StoreConformance, FixedRateIsRejectedOutsideRelease) {
  const Status s = store_->UpsertTask({.id = "a",
                                       .settings_json = std::string(kDurationSettings),
                                       .start_at = FixedRateAfter{minutes(1)},
                                       .next_start_at = DbNowPlus{}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
}

// The job queue's store is no plugin's, on every backend: a plugin division is refused before anything opens.
TEST_P(StoreConformance, AJobStoreRefusesAPluginDivision) {
  StoreOptions options;
  options.clock = &clock_;
  options.plugin_division = PluginDivision{};
  auto opened = GetParam().open_jobs(ns_ + "_jobs", options);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
}

TEST_P(StoreConformance, EmptyTicketIsRejected) {
  AddTask("a", DbNowPlus{});
  auto claimed = store_->TryClaimTask({.id = "a", .ticket = "", .timeout = minutes(1)});
  EXPECT_EQ(claimed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Row("a").current_run_ticket, std::nullopt);
}

TEST(RedactDatabaseUrlTest, HidesEveryFormOfPassword) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://app:s3cret@db:5432/octop"), "postgresql://app:***@db:5432/octop");
  EXPECT_EQ(RedactDatabaseUrl("postgres://app:p%40ss@db/octop?sslmode=require"),
            "postgres://app:***@db/octop?sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db/octop?user=app&password=s3cret&sslmode=require"),
            "postgresql://db/octop?user=app&password=***&sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("host=db password='a b\\' c' user=app"), "host=db password=*** user=app");
  // Nothing to hide: unchanged.
  EXPECT_EQ(RedactDatabaseUrl("postgresql://app@db/octop"), "postgresql://app@db/octop");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db/octop?application_name=mypassword=x"),
            "postgresql://db/octop?application_name=mypassword=x");
  EXPECT_EQ(RedactDatabaseUrl("sqlite:/var/lib/octop"), "sqlite:/var/lib/octop");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db:5432/a@b"), "postgresql://db:5432/a@b");
}

}  // namespace
}  // namespace octop::store::testing
