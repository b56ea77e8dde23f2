// The text rules every layer shares (core/js_text.h): JavaScript's whitespace as Node reads it, and
// well-formed UTF-8 as PostgreSQL, JSON and decodeURIComponent accept it.
#include "core/js_text.h"

#include <string>

#include <gtest/gtest.h>

namespace octop::text {
namespace {

TEST(JsText, EveryJavaScriptWhitespaceCodePointAndNothingElse) {
  // ECMAScript's WhiteSpace and LineTerminator, in UTF-8.
  const std::string spaces[] = {
      "\t",           "\n",           "\v",           "\f",           "\r",           " ",
      "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9",
      "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80", "\xEF\xBB\xBF"};
  for (const std::string& s : spaces) EXPECT_EQ(JsWhitespaceLength(s, 0), s.size()) << s;
  // Near misses: U+200B (zero-width space), U+0085 (NEL: whitespace in Java, not in JavaScript), letters.
  for (const std::string s : {"\xE2\x80\x8B", "\xC2\x85", "a", "\xE2\x80"}) {
    EXPECT_EQ(JsWhitespaceLength(s, 0), 0u) << s;
  }
}

TEST(JsText, TrimStripsBothEndsLikeStringPrototypeTrim) {
  EXPECT_EQ(JsTrim(" \xC2\xA0 a b \xE3\x80\x80\n"), "a b");
  EXPECT_EQ(JsTrim("\xEF\xBB\xBF"), "");
  EXPECT_EQ(JsTrim(""), "");
  EXPECT_EQ(JsTrim("\xE2\x80\x8B"), "\xE2\x80\x8B") << "U+200B is not whitespace";
}

TEST(JsText, WellFormedUtf8OnlyNoOverlongsSurrogatesOrBeyondU10FFFF) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));  // é € 😀 U+10FFFF
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3))) << "NUL is U+0000; callers that refuse it say so";
  for (const std::string bad : {"\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF",  // overlong
                                "\xED\xA0\x80", "\xED\xBF\xBF",                              // surrogates
                                "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",                      // > U+10FFFF
                                "\x80", "\xC3", "\xE2\x82", "\xFF"}) {                       // stray, cut
    EXPECT_FALSE(IsValidUtf8(bad)) << "bytes of length " << bad.size();
  }
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xED\x9F\xBF", 0), 3u) << "U+D7FF, just below the surrogates";
}

}  // namespace
}  // namespace octop::text
