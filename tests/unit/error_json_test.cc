#include <gtest/gtest.h>

#include <octop/error_json.h>

namespace octop {
namespace {

TEST(ErrorJson, SerializesNameThenMessageLikeBackstage) {
  EXPECT_EQ(SerializeErrorMessage("Task was cancelled"),
            R"({"name":"Error","message":"Task was cancelled"})");
  EXPECT_EQ(SerializeError({.name = "TypeError", .message = "x is undefined"}),
            R"({"name":"TypeError","message":"x is undefined"})");
}

TEST(ErrorJson, EscapesQuotesAndControlCharacters) {
  EXPECT_EQ(SerializeErrorMessage("say \"hi\"\n"), R"({"name":"Error","message":"say \"hi\"\n"})");
}

TEST(ErrorJson, InvalidUtf8IsReplacedNotLost) {
  const std::string json = SerializeErrorMessage(std::string("bad \xff byte"));
  auto parsed = ParseSerializedError(json);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->message, "bad \xEF\xBF\xBD byte");
}

TEST(ErrorJson, StackAndCauseRoundTrip) {
  SerializedError e{.name = "Error",
                    .message = "outer",
                    .stack = "Error: outer\n    at x",
                    .cause_json = SerializeErrorMessage("inner")};
  const std::string json = SerializeError(e);
  EXPECT_EQ(
      json,
      R"({"name":"Error","message":"outer","stack":"Error: outer\n    at x","cause":{"name":"Error","message":"inner"}})");
  auto parsed = ParseSerializedError(json);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->stack, e.stack);
  EXPECT_EQ(parsed->cause_json, R"({"name":"Error","message":"inner"})");
}

TEST(ErrorJson, ParseRejectsWhatIsNotAnError) {
  EXPECT_FALSE(ParseSerializedError("not json").has_value());
  EXPECT_FALSE(ParseSerializedError("[1,2]").has_value());
  EXPECT_FALSE(ParseSerializedError(R"({"name":"Error"})").has_value());
  auto no_name = ParseSerializedError(R"({"message":"m"})");
  ASSERT_TRUE(no_name.has_value());
  EXPECT_EQ(no_name->name, "Error");
}

}  // namespace
}  // namespace octop
