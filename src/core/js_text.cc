#include "core/js_text.h"

namespace octop::text {

std::size_t JsWhitespaceLength(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  const unsigned b0 = byte(0);
  if (b0 == ' ' || (b0 >= 0x09 && b0 <= 0x0d)) return 1;
  const unsigned b1 = byte(1), b2 = byte(2);
  if (b0 == 0xc2 && b1 == 0xa0) return 2;                // U+00A0
  if (b0 == 0xe1 && b1 == 0x9a && b2 == 0x80) return 3;  // U+1680
  if (b0 == 0xe2 && b1 == 0x80 && ((b2 >= 0x80 && b2 <= 0x8a) || b2 == 0xa8 || b2 == 0xa9 || b2 == 0xaf)) {
    return 3;  // U+2000..U+200A, U+2028, U+2029, U+202F
  }
  if (b0 == 0xe2 && b1 == 0x81 && b2 == 0x9f) return 3;  // U+205F
  if (b0 == 0xe3 && b1 == 0x80 && b2 == 0x80) return 3;  // U+3000
  if (b0 == 0xef && b1 == 0xbb && b2 == 0xbf) return 3;  // U+FEFF
  return 0;
}

std::string_view JsTrim(std::string_view s) {
  std::size_t begin = 0;
  while (std::size_t n = JsWhitespaceLength(s, begin)) begin += n;
  std::size_t end = s.size();
  while (end > begin) {
    // Whitespace code points are 1 to 3 bytes long; find one that ends exactly at `end`.
    std::size_t found = 0;
    for (std::size_t len = 1; len <= 3 && len <= end - begin; ++len) {
      if (JsWhitespaceLength(s, end - len) == len) {
        found = len;
        break;
      }
    }
    if (found == 0) break;
    end -= found;
  }
  return s.substr(begin, end - begin);
}

std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if ((b0 == 0xe0 && b1 < 0xa0) ||   // overlong three-byte form
      (b0 == 0xed && b1 >= 0xa0) ||  // a UTF-16 surrogate
      (b0 == 0xf0 && b1 < 0x90) ||   // overlong four-byte form
      (b0 == 0xf4 && b1 >= 0x90)) {  // above U+10FFFF
    return 0;
  }
  return n;
}

bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace octop::text
