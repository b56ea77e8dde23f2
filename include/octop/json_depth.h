// The nesting bound on every JSON text octop accepts from outside: job payloads, request bodies, settings and
// error JSON read back from the database, and the answers the CLI prints. nlohmann::json serialises
// recursively, so a text nested a few hundred thousand levels deep would overflow the stack wherever it is
// dumped again; the check runs on the text, before any parse, in one linear pass without recursion
// (docs/reliability.md, "Limits").
//
// Thread-safety: pure functions.
#ifndef OCTOP_JSON_DEPTH_H_
#define OCTOP_JSON_DEPTH_H_

#include <cstddef>
#include <string_view>

namespace octop {

// The deepest nesting of arrays and objects accepted; a scalar is depth 0, `[]` depth 1.
inline constexpr std::size_t kMaxJsonDepth = 128;

// The deepest nesting of '[' and '{' in `text`, outside strings. Meant as a guard before parsing: an invalid
// text gets a number too, and the parse that follows rejects it.
std::size_t JsonNestingDepth(std::string_view text);

// JsonNestingDepth(text) <= kMaxJsonDepth.
inline bool JsonDepthAllowed(std::string_view text) { return JsonNestingDepth(text) <= kMaxJsonDepth; }

}  // namespace octop

#endif  // OCTOP_JSON_DEPTH_H_
