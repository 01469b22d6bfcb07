// Chrome trace JSON: parses back (with a small strict JSON parser below) and has the
// schema Perfetto expects: traceEvents, ph "X", ts/dur in µs, pid/tid, args.
#include "profiler/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "core/file_io.h"
#include "core/json_text.h"

namespace peregrine::profiler {
namespace {

// Just enough JSON (RFC 8259) to check a trace: objects, arrays, strings with escapes,
// numbers, literals. Anything malformed fails the parse.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;
  const Json& operator[](const std::string& key) const {
    static const Json missing;
    auto it = object.find(key);
    return it == object.end() ? missing : it->second;
  }
  bool has(const std::string& key) const { return object.count(key) > 0; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}
  bool parse(Json* out) {
    skip_space();
    if (!value(out)) return false;
    skip_space();
    return i_ == s_.size();
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool value(Json* out) {
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return object(out);
    if (c == '[') return array(out);
    if (c == '"') {
      out->kind = Json::Kind::kString;
      return string(&out->string);
    }
    if (literal("true")) {
      out->kind = Json::Kind::kBool;
      out->boolean = true;
      return true;
    }
    if (literal("false")) {
      out->kind = Json::Kind::kBool;
      return true;
    }
    if (literal("null")) return true;
    return number(out);
  }
  bool number(Json* out) {
    const size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
    if (s_[i_] == '0' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))
      return false;  // no leading zeros
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    out->kind = Json::Kind::kNumber;
    out->number = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
    return true;
  }
  bool string(std::string* out) {
    ++i_;  // opening quote
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;  // raw control characters are not allowed
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'n':
          *out += '\n';
          break;
        case 't':
          *out += '\t';
          break;
        case 'r':
          *out += '\r';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          for (size_t k = 0; k < 4; ++k)
            if (!std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
          const unsigned cp = std::stoul(s_.substr(i_, 4), nullptr, 16);
          i_ += 4;
          // Enough for these tests: ASCII as is, anything else as a marker.
          if (cp < 0x80)
            *out += static_cast<char>(cp);
          else
            *out += "\xEF\xBF\xBD";
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool array(Json* out) {
    out->kind = Json::Kind::kArray;
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    while (true) {
      skip_space();
      Json item;
      if (!value(&item)) return false;
      out->array.push_back(std::move(item));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return true;
      }
      return false;
    }
  }
  bool object(Json* out) {
    out->kind = Json::Kind::kObject;
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    while (true) {
      skip_space();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(&key)) return false;
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ':') return false;
      ++i_;
      skip_space();
      Json item;
      if (!value(&item)) return false;
      out->object[key] = std::move(item);
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return true;
      }
      return false;
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};

TEST(JsonParserSelfCheck, RejectsMalformed) {
  Json j;
  for (const char* bad : {"{", "{\"a\" 1}", "[1,]", "\"\x01\"", "01", "{\"a\": nan}", "[1] x"}) {
    std::string text(bad);
    EXPECT_FALSE(JsonParser(text).parse(&j)) << bad;
  }
  std::string good = "{\"a\": [1, -2.5e3, true, null, \"x\\u0041\"]}";
  ASSERT_TRUE(JsonParser(good).parse(&j));
  EXPECT_EQ(j["a"].array[4].string, "xA");
}

Trace sample_trace() {
  Trace t;
  t.pid = 4242;
  t.process_name = "peregrine profile m.onnx";
  t.threads = {{77, "executor"}};
  t.events.push_back({"run 0", "run", 10.0, 500.0, 4242, 77, {{"iteration", "0"}}});
  // A name with quotes, a backslash, a newline, a control byte and invalid UTF-8.
  t.events.push_back({std::string("conv \"1\"\\\n\x01\xff"),
                      "node",
                      12.5,
                      300.25,
                      4242,
                      77,
                      {{"op_type", json_string("Conv")},
                       {"inputs", json_string("float32[1,3,8,8], float32[4,3,3,3]")},
                       {"outputs", json_string("float32[1,4,6,6]")},
                       {"flops", json_number(7776)},
                       {"bytes", json_number(1152)}}});
  t.events.push_back(
      {"relu",
       "node",
       313.0,
       2.0,
       4242,
       77,
       {{"op_type", json_string("Relu")},
        {"flops", json_number(144)},
        {"bytes", json_number(std::numeric_limits<double>::infinity())}}});  // not finite -> null
  t.metadata = {{"model", json_string("m.onnx")}};
  return t;
}

TEST(Trace, ParsesBackWithChromeTraceSchema) {
  const std::string text = trace_to_json(sample_trace());
  Json root;
  ASSERT_TRUE(JsonParser(text).parse(&root)) << text;
  ASSERT_EQ(root.kind, Json::Kind::kObject);
  const Json& events = root["traceEvents"];
  ASSERT_EQ(events.kind, Json::Kind::kArray);
  int complete = 0, metadata = 0;
  for (const Json& e : events.array) {
    ASSERT_EQ(e.kind, Json::Kind::kObject);
    ASSERT_EQ(e["ph"].kind, Json::Kind::kString);
    EXPECT_EQ(e["pid"].number, 4242);
    ASSERT_EQ(e["tid"].kind, Json::Kind::kNumber);
    ASSERT_EQ(e["name"].kind, Json::Kind::kString);
    if (e["ph"].string == "M") {
      ++metadata;
      EXPECT_EQ(e["args"]["name"].kind, Json::Kind::kString);
      continue;
    }
    ASSERT_EQ(e["ph"].string, "X");
    ++complete;
    EXPECT_EQ(e["tid"].number, 77);
    ASSERT_EQ(e["ts"].kind, Json::Kind::kNumber);
    ASSERT_EQ(e["dur"].kind, Json::Kind::kNumber);
    EXPECT_GE(e["dur"].number, 0);
    ASSERT_EQ(e["args"].kind, Json::Kind::kObject);
  }
  EXPECT_EQ(complete, 3);
  EXPECT_EQ(metadata, 2);  // process_name and thread_name

  const Json& conv = events.array[3];
  EXPECT_EQ(conv["name"].string,
            "conv \"1\"\\\n\x01\xEF\xBF\xBD");  // escaped, invalid byte replaced
  EXPECT_EQ(conv["cat"].string, "node");
  EXPECT_DOUBLE_EQ(conv["ts"].number, 12.5);
  EXPECT_DOUBLE_EQ(conv["dur"].number, 300.25);
  EXPECT_EQ(conv["args"]["op_type"].string, "Conv");
  EXPECT_EQ(conv["args"]["outputs"].string, "float32[1,4,6,6]");
  EXPECT_EQ(conv["args"]["flops"].number, 7776);
  EXPECT_EQ(conv["args"]["bytes"].number, 1152);
  EXPECT_EQ(events.array[4]["args"]["bytes"].kind, Json::Kind::kNull);
  EXPECT_EQ(root["displayTimeUnit"].string, "ms");
  EXPECT_EQ(root["metadata"]["model"].string, "m.onnx");
}

TEST(Trace, NodeEventsNestInsideTheirRun) {
  Json root;
  const std::string text = trace_to_json(sample_trace());
  ASSERT_TRUE(JsonParser(text).parse(&root));
  const Json* run = nullptr;
  for (const Json& e : root["traceEvents"].array)
    if (e["cat"].string == "run") run = &e;
  ASSERT_NE(run, nullptr);
  for (const Json& e : root["traceEvents"].array) {
    if (e["cat"].string != "node") continue;
    EXPECT_GE(e["ts"].number, (*run)["ts"].number);
    EXPECT_LE(e["ts"].number + e["dur"].number, (*run)["ts"].number + (*run)["dur"].number);
  }
}

TEST(Trace, JsonHelpers) {
  EXPECT_EQ(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
  EXPECT_EQ(json_string("\xc3\xa9"), "\"\xc3\xa9\"");        // valid UTF-8 kept
  EXPECT_EQ(json_string("\xc0\xaf"), "\"\\ufffd\\ufffd\"");  // overlong form rejected
  EXPECT_EQ(json_number(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(json_number(1e12), "1000000000000");
  EXPECT_EQ(json_number(-0.25), "-0.25");
  EXPECT_EQ(json_number(1e300), "1e+300");
  EXPECT_EQ(to_valid_utf8("ok\xed\xa0\x80"),
            "ok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(Trace, WritesAtomicallyAndReportsFailure) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("peregrine_trace_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "t.json";
  ASSERT_TRUE(write_file_atomically(file.string(), "{}\n").is_ok());
  auto contents = [&] {
    std::ifstream in(file);
    std::stringstream got;
    got << in.rdbuf();
    return got.str();
  };
  EXPECT_EQ(contents(), "{}\n");
  ASSERT_TRUE(write_file_atomically(file.string(), {"[1, ", "2]", ""}).is_ok());  // pieces in order
  EXPECT_EQ(contents(), "[1, 2]");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);  // no temporary left behind
  EXPECT_FALSE(write_file_atomically((dir / "missing" / "t.json").string(), "{}").is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace peregrine::profiler
