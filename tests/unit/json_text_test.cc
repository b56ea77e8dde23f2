// JSON kept as text (core/json_text.h): a payload's numbers and strings pass through as written.
#include "core/json_text.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace octop::text {
namespace {

TEST(JsonText, CompactKeepsNumbersAndStringsAsWrittenAndDropsOnlyWhitespace) {
  EXPECT_EQ(CompactJson(
                " { \"a b\" : [ 1 , 12345678901234567890123 , 0.10 , 1E+2 ] ,\n\t\"c\" : \" x \\\" } \" } "),
            "{\"a b\":[1,12345678901234567890123,0.10,1E+2],\"c\":\" x \\\" } \"}");
  EXPECT_EQ(CompactJson("\xEF\xBB\xBF 7"), "7") << "the byte order mark nlohmann::json skips";
  EXPECT_EQ(CompactJson("\"\\u00e9\\/\""), "\"\\u00e9\\/\"") << "escapes are kept, not decoded";
}

TEST(JsonText, MemberTextIsTheValueAsWrittenWhateverItsKind) {
  const std::string body =
      R"({"kind":"k","payload" : {"n":123456789012345678901234567890,"s":"}]\"","a":[[],{}]} ,"queue":"q"})";
  EXPECT_EQ(JsonMemberText(body, "payload"),
            R"({"n":123456789012345678901234567890,"s":"}]\"","a":[[],{}]})");
  EXPECT_EQ(JsonMemberText(body, "kind"), "\"k\"");
  EXPECT_EQ(JsonMemberText(body, "queue"), "\"q\"");
  EXPECT_EQ(JsonMemberText(body, "nope"), std::nullopt);
  EXPECT_EQ(JsonMemberText(R"({"p":-1.5e-7})", "p"), "-1.5e-7");
  EXPECT_EQ(JsonMemberText(R"({"p":null,"q":true})", "p"), "null");
  EXPECT_EQ(JsonMemberText(R"({"p":false})", "p"), "false");
  EXPECT_EQ(JsonMemberText("{}", "p"), std::nullopt);
  EXPECT_EQ(JsonMemberText("[{\"p\":1}]", "p"), std::nullopt) << "not an object";
  EXPECT_EQ(JsonMemberText("{\"o\":{\"p\":1}}", "p"), std::nullopt) << "only the top level";
}

TEST(JsonText, MemberTextAgreesWithTheParserOnRepeatedAndEscapedKeys) {
  // nlohmann::json (like JSON.parse) keeps the last of repeated keys; the text must give the same value.
  const std::string repeated = R"({"p":1,"x":{"p":2},"p":[3]})";
  EXPECT_EQ(JsonMemberText(repeated, "p"), "[3]");
  EXPECT_EQ(nlohmann::json::parse(repeated)["p"].dump(), "[3]");
  // A key spelled with escapes is the same key.
  EXPECT_EQ(JsonMemberText(R"({"p\u0061yload":"yes"})", "payload"), "\"yes\"");
  EXPECT_EQ(JsonMemberText(R"({"pay\"load":1})", "payload"), std::nullopt);
  EXPECT_EQ(JsonMemberText("\xEF\xBB\xBF{\"p\":1}", "p"), "1");
}

TEST(JsonText, DeepNestingIsCutWithoutRecursion) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_EQ(JsonMemberText("{\"p\":" + deep + "}", "p")->size(), deep.size());
  EXPECT_EQ(CompactJson(deep).size(), deep.size());
}

TEST(JsonText, JoinedObjectsKeepTheirMembersInOrderAndEmptyOnesAddNothing) {
  EXPECT_EQ(JoinJsonObjects({R"({"a":1})", R"({"p":12345678901234567890123})", R"({"b":"}","c":[]})"}),
            R"({"a":1,"p":12345678901234567890123,"b":"}","c":[]})");
  EXPECT_EQ(JoinJsonObjects({"{}", R"({"p":null})", "{}"}), R"({"p":null})");
  EXPECT_EQ(JoinJsonObjects({"{}", "{}"}), "{}");
  EXPECT_EQ(JoinJsonObjects({}), "{}");
}

TEST(JsonText, NulEscapeIsFoundInKeysAndValuesButNotWhereABackslashIsEscaped) {
  EXPECT_TRUE(JsonHasNulEscape(R"({"a":"x\u0000y"})"));
  EXPECT_TRUE(JsonHasNulEscape(R"({"\u0000":1})"));
  EXPECT_TRUE(JsonHasNulEscape(R"(["\\\u0000"])"));
  EXPECT_FALSE(JsonHasNulEscape(R"(["\\u0000"])")) << "an escaped backslash, then the letters u0000";
  EXPECT_TRUE(JsonHasNulEscape(R"(["\u00000"])")) << "U+0000, then the digit 0";
  EXPECT_FALSE(JsonHasNulEscape(R"(["\u0001"])"));
  EXPECT_FALSE(JsonHasNulEscape("0"));
}

}  // namespace
}  // namespace octop::text
