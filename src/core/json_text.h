// JSON kept as text. A job's payload goes from a request body (or the CLI's --payload) to the database and
// back out without being re-serialised, because nlohmann::json, which octop parses JSON with, holds a number
// as a 64-bit integer or a double: 12345678901234567890123 or 0.12345678901234567890 would come back changed
// (docs/jobs.md, "Payloads"). These functions cut, compact and inspect JSON text instead of parsing it; each
// expects a text that nlohmann::json::accept() accepted, and for any other gives an unspecified result
// without reading outside it.
//
// Thread-safety: pure functions.
#ifndef OCTOP_CORE_JSON_TEXT_H_
#define OCTOP_CORE_JSON_TEXT_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace octop::text {

// `valid` without the whitespace between its tokens; strings and numbers exactly as written.
std::string CompactJson(std::string_view valid);

// The text of the value of member `key` of the object `valid_object` (at its top level; the last one when the
// key is repeated, as nlohmann::json and JSON.parse keep the last). Keys are compared after unescaping.
// nullopt when the text is not an object or has no such member.
std::optional<std::string_view> JsonMemberText(std::string_view valid_object, std::string_view key);

// One JSON object of the members of `objects`, in order: each a compact object text as nlohmann::json dumps
// it
// (`{...}`, no whitespace around it). How a value kept as text joins the members around it:
// JoinJsonObjects({Dump(head), "{\"payload\":" + stored + "}", Dump(tail)}).
std::string JoinJsonObjects(std::initializer_list<std::string_view> objects);

// Whether a string in `valid` (a key or a value) holds the escape \u0000: PostgreSQL's jsonb cannot store
// U+0000, so octop refuses such a payload on both backends (docs/jobs.md, "Payloads").
bool JsonHasNulEscape(std::string_view valid);

}  // namespace octop::text

#endif  // OCTOP_CORE_JSON_TEXT_H_
