#include "core/json_value.h"

#include <charconv>
#include <cstring>

#include "core/json_text.h"

namespace peregrine {

Json Json::make_string(std::string s) {
  Json j;
  j.type = Type::kString;
  j.string = std::move(s);
  return j;
}

Json Json::make_number(double v) {
  Json j;
  j.type = Type::kNumber;
  j.number = v;
  return j;
}

Json Json::make_object() {
  Json j;
  j.type = Type::kObject;
  return j;
}

Json Json::make_array() {
  Json j;
  j.type = Type::kArray;
  return j;
}

const Json* Json::get(const std::string& key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &values[i];
  return nullptr;
}

Json* Json::get(const std::string& key) {
  return const_cast<Json*>(static_cast<const Json*>(this)->get(key));
}

Json& Json::set(const std::string& key, Json value) {
  if (Json* existing = get(key)) return *existing = std::move(value);
  keys.push_back(key);
  values.push_back(std::move(value));
  return values.back();
}

namespace {

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  Expected<Json> parse_document() {
    Json v;
    PG_RETURN_IF_ERROR(parse_value(&v, 0));
    skip_space();
    if (pos_ != s_.size()) return fail("trailing characters");
    return v;
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_input("malformed JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) && s_[pos_] != '\0') ++pos_;
  }
  bool consume(char ch) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ch) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status parse_value(Json* out, int depth) {
    if (depth > 64) return fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char ch = s_[pos_];
    if (ch == '{') {
      ++pos_;
      out->type = Json::Type::kObject;
      if (consume('}')) return Status::ok();
      do {
        skip_space();
        Json key;
        if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
        PG_RETURN_IF_ERROR(parse_string(&key.string));
        if (!consume(':')) return fail("expected ':'");
        Json value;
        PG_RETURN_IF_ERROR(parse_value(&value, depth + 1));
        out->keys.push_back(std::move(key.string));
        out->values.push_back(std::move(value));
      } while (consume(','));
      if (!consume('}')) return fail("expected '}'");
      return Status::ok();
    }
    if (ch == '[') {
      ++pos_;
      out->type = Json::Type::kArray;
      if (consume(']')) return Status::ok();
      do {
        Json value;
        PG_RETURN_IF_ERROR(parse_value(&value, depth + 1));
        out->array.push_back(std::move(value));
      } while (consume(','));
      if (!consume(']')) return fail("expected ']'");
      return Status::ok();
    }
    if (ch == '"') {
      out->type = Json::Type::kString;
      return parse_string(&out->string);
    }
    for (const char* lit : {"true", "false", "null"}) {
      size_t n = std::strlen(lit);
      if (s_.compare(pos_, n, lit) == 0) {
        pos_ += n;
        out->type = lit[0] == 'n' ? Json::Type::kNull : Json::Type::kBool;
        out->boolean = lit[0] == 't';
        return Status::ok();
      }
    }
    size_t start = pos_;
    while (pos_ < s_.size() && std::strchr("+-.eE0123456789", s_[pos_]) && s_[pos_] != '\0') ++pos_;
    if (start == pos_) return fail("unexpected character");
    double v = 0;
    auto r = std::from_chars(s_.data() + start, s_.data() + pos_, v);
    if (r.ec != std::errc() || r.ptr != s_.data() + pos_) return fail("bad number");
    out->type = Json::Type::kNumber;
    out->number = v;
    return Status::ok();
  }

  Status parse_string(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char ch = s_[pos_++];
      if (ch != '\\') {
        *out += ch;
        continue;
      }
      if (pos_ >= s_.size()) return fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return fail("short \\u escape");
          unsigned code = 0;
          auto r = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, code, 16);
          if (r.ptr != s_.data() + pos_ + 4) return fail("bad \\u escape");
          pos_ += 4;
          // A high surrogate followed by \\u and a low one is one code point past the BMP.
          if (code >= 0xD800 && code < 0xDC00 && pos_ + 6 <= s_.size() && s_[pos_] == '\\' &&
              s_[pos_ + 1] == 'u') {
            unsigned low = 0;
            auto lr = std::from_chars(s_.data() + pos_ + 2, s_.data() + pos_ + 6, low, 16);
            if (lr.ptr == s_.data() + pos_ + 6 && low >= 0xDC00 && low < 0xE000) {
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
              pos_ += 6;
            }
          }
          if (code < 0x80) {
            *out += static_cast<char>(code);
          } else if (code < 0x800) {
            *out += static_cast<char>(0xC0 | (code >> 6));
            *out += static_cast<char>(0x80 | (code & 0x3F));
          } else if (code < 0x10000) {
            *out += static_cast<char>(0xE0 | (code >> 12));
            *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            *out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            *out += static_cast<char>(0xF0 | (code >> 18));
            *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
            *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            *out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          return fail("bad escape");
      }
    }
    if (pos_ >= s_.size()) return fail("unterminated string");
    ++pos_;  // closing quote
    return Status::ok();
  }

  const std::string& s_;
  size_t pos_ = 0;
};

void write_json(const Json& v, std::string* out) {
  switch (v.type) {
    case Json::Type::kNull:
      *out += "null";
      return;
    case Json::Type::kBool:
      *out += v.boolean ? "true" : "false";
      return;
    case Json::Type::kNumber:
      *out += json_number(v.number);
      return;
    case Json::Type::kString:
      *out += json_string(v.string);
      return;
    case Json::Type::kArray:
      *out += '[';
      for (size_t i = 0; i < v.array.size(); ++i) {
        if (i) *out += ',';
        write_json(v.array[i], out);
      }
      *out += ']';
      return;
    case Json::Type::kObject:
      *out += '{';
      for (size_t i = 0; i < v.keys.size(); ++i) {
        if (i) *out += ',';
        *out += json_string(v.keys[i]);
        *out += ':';
        write_json(v.values[i], out);
      }
      *out += '}';
      return;
  }
}

}  // namespace

Expected<Json> parse_json(const std::string& text) { return JsonReader(text).parse_document(); }

std::string to_json_text(const Json& value) {
  std::string out;
  write_json(value, &out);
  return out;
}

}  // namespace peregrine
