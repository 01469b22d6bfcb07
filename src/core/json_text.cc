#include "core/json_text.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace peregrine {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t len = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else
    return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  // Reject overlong forms, surrogates and code points past U+10FFFF.
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

}  // namespace

std::string to_valid_utf8(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      o += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      o.append(s, i, len);
      i += len;
    }
  }
  return o;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      o += "\\ufffd";
      ++i;
      continue;
    }
    if (len > 1) {
      o.append(s, i, len);
    } else if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
    i += len;
  }
  return o + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  // Whole numbers (FLOP and byte counts) exactly; others to 10 significant digits.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0)
    std::snprintf(b, sizeof b, "%.0f", v);
  else
    std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

}  // namespace peregrine
