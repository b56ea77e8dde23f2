// Text as octop must read it: JavaScript's whitespace (where input must be read as Backstage, a Node.js
// program, reads it: cron fields, durations, task ids) and well-formed UTF-8 (what PostgreSQL text, JSON and
// a decoded URL accept). One place for both, so the cron parser, the duration parser, the stores and the REST
// API cannot disagree about either.
//
// Thread-safety: pure functions.
#ifndef OCTOP_CORE_JS_TEXT_H_
#define OCTOP_CORE_JS_TEXT_H_

#include <cstddef>
#include <string_view>

namespace octop::text {

// Length in bytes of the JavaScript WhiteSpace or LineTerminator code point (what /\s/ and
// String.prototype.trim match) that starts at s[i] in UTF-8, or 0.
std::size_t JsWhitespaceLength(std::string_view s, std::size_t i);

// String.prototype.trim on UTF-8 text.
std::string_view JsTrim(std::string_view s);

// Length of the well-formed UTF-8 sequence that starts at s[i], or 0: overlong forms, UTF-16 surrogates
// (U+D800..U+DFFF) and code points above U+10FFFF are not well-formed.
std::size_t Utf8SequenceLength(std::string_view s, std::size_t i);

// Whether all of s is well-formed UTF-8 (NUL bytes included: they are U+0000).
bool IsValidUtf8(std::string_view s);

}  // namespace octop::text

#endif  // OCTOP_CORE_JS_TEXT_H_
