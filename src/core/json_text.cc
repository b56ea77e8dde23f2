#include "core/json_text.h"

#include <nlohmann/json.hpp>

namespace octop::text {

namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t SkipSpace(std::string_view t, std::size_t i) {
  while (i < t.size() && IsJsonSpace(t[i])) ++i;
  return i;
}

// nlohmann::json skips a UTF-8 byte order mark before the value; so must a reader of the same text.
std::size_t SkipBom(std::string_view t) { return t.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0; }

// The index just past the string that opens at t[i].
std::size_t SkipString(std::string_view t, std::size_t i) {
  for (++i; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;  // the escaped character cannot end the string
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return t.size();
}

// The index just past the value that starts at t[i]. Iterative: nesting costs no stack.
std::size_t SkipValue(std::string_view t, std::size_t i) {
  if (i >= t.size()) return t.size();
  if (t[i] == '"') return SkipString(t, i);
  if (t[i] == '{' || t[i] == '[') {
    std::size_t depth = 0;
    while (i < t.size()) {
      const char c = t[i];
      if (c == '"') {
        i = SkipString(t, i);
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return i + 1;
      }
      ++i;
    }
    return t.size();
  }
  while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && !IsJsonSpace(t[i])) ++i;
  return i;
}

// Whether the key token (quotes included) names `key`. Most keys have no escape and compare as they are.
bool KeyIs(std::string_view token, std::string_view key) {
  if (token.size() < 2) return false;
  const std::string_view inner = token.substr(1, token.size() - 2);
  if (inner.find('\\') == std::string_view::npos) return inner == key;
  const nlohmann::json decoded = nlohmann::json::parse(token, nullptr, false);
  return decoded.is_string() && decoded.get_ref<const std::string&>() == key;
}

}  // namespace

std::string CompactJson(std::string_view valid) {
  std::string out;
  out.reserve(valid.size());
  for (std::size_t i = SkipBom(valid); i < valid.size();) {
    if (valid[i] == '"') {
      const std::size_t end = SkipString(valid, i);
      out.append(valid.substr(i, end - i));
      i = end;
    } else {
      if (!IsJsonSpace(valid[i])) out.push_back(valid[i]);
      ++i;
    }
  }
  return out;
}

std::optional<std::string_view> JsonMemberText(std::string_view t, std::string_view key) {
  std::size_t i = SkipSpace(t, SkipBom(t));
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  i = SkipSpace(t, i + 1);
  std::optional<std::string_view> found;
  while (i < t.size() && t[i] == '"') {
    const std::size_t key_end = SkipString(t, i);
    const std::string_view token = t.substr(i, key_end - i);
    i = SkipSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    i = SkipSpace(t, i + 1);
    const std::size_t value_end = SkipValue(t, i);
    if (KeyIs(token, key)) found = t.substr(i, value_end - i);
    i = SkipSpace(t, value_end);
    if (i >= t.size() || t[i] != ',') break;
    i = SkipSpace(t, i + 1);
  }
  return found;
}

std::string JoinJsonObjects(std::initializer_list<std::string_view> objects) {
  std::string out = "{";
  for (std::string_view object : objects) {
    if (object.size() <= 2) continue;  // {}
    if (out.size() > 1) out += ',';
    out.append(object.substr(1, object.size() - 2));
  }
  return out + "}";
}

bool JsonHasNulEscape(std::string_view valid) {
  bool in_string = false;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const char c = valid[i];
    if (!in_string) {
      in_string = c == '"';
    } else if (c == '"') {
      in_string = false;
    } else if (c == '\\') {
      if (valid.substr(i + 1, 5) == "u0000") return true;
      ++i;  // the escaped character: an escaped backslash or quote is not the start of anything
    }
  }
  return false;
}

}  // namespace octop::text
