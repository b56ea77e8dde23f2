// What every task store shares: task id validation (done before any write, identically on every backend).
#include <cstdint>
#include <optional>
#include <string>

#include "store/task_store.h"

namespace octop::store {

namespace {

constexpr std::size_t kMaxTaskIdBytes = 255;  // the column is varchar(255)

// Decodes one UTF-8 sequence at `pos`, advancing it; nullopt for anything that is not well-formed UTF-8
// (overlong forms, surrogates and code points above U+10FFFF included), so ids round-trip through
// PostgreSQL's UTF8 text.
std::optional<char32_t> DecodeUtf8(std::string_view s, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(s[i]); };
  const std::uint8_t b0 = byte(pos);
  int extra = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (b0 < 0x80) {
    ++pos;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    extra = 1, cp = b0 & 0x1Fu, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    extra = 2, cp = b0 & 0x0Fu, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    extra = 3, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return std::nullopt;
  }
  if (pos + static_cast<std::size_t>(extra) >= s.size()) return std::nullopt;  // truncated sequence
  for (int i = 1; i <= extra; ++i) {
    const std::uint8_t b = byte(pos + static_cast<std::size_t>(i));
    if ((b & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  pos += static_cast<std::size_t>(extra) + 1;
  return cp;
}

// What JavaScript's String.prototype.trim() strips (Backstage's validateId trims before its emptiness check).
bool IsJsWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

}  // namespace

Status ValidateTaskId(std::string_view id) {
  if (id.size() > kMaxTaskIdBytes) {
    return InvalidArgumentError("Task id '" + std::string(id.substr(0, 40)) +
                                "...' is too long: " + std::to_string(id.size()) + " bytes, the limit is " +
                                std::to_string(kMaxTaskIdBytes) + " bytes");
  }
  bool only_whitespace = true;
  for (std::size_t pos = 0; pos < id.size();) {
    const std::optional<char32_t> cp = DecodeUtf8(id, pos);
    if (!cp) return InvalidArgumentError("Task id is not valid UTF-8");
    if (*cp == 0) return InvalidArgumentError("Task id must not contain a NUL character");
    if (!IsJsWhitespace(*cp)) only_whitespace = false;
  }
  if (only_whitespace)
    return InvalidArgumentError(std::string(id) + " is not a valid ID, expected non-empty string");
  return Status::Ok();
}

}  // namespace octop::store
