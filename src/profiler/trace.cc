#include "profiler/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace peregrine::profiler {

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

std::string trace_to_json(const Trace& trace) {
  std::ostringstream o;
  o << "{\"traceEvents\": [\n";
  bool first = true;
  auto sep = [&]() -> std::ostringstream& {
    o << (first ? "  " : ",\n  ");
    first = false;
    return o;
  };
  sep() << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << trace.pid
        << ", \"tid\": 0, \"args\": {\"name\": " << json_string(trace.process_name) << "}}";
  for (const auto& [tid, name] : trace.threads)
    sep() << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << trace.pid
          << ", \"tid\": " << tid << ", \"args\": {\"name\": " << json_string(name) << "}}";
  for (const TraceEvent& e : trace.events) {
    sep() << "{\"name\": " << json_string(e.name) << ", \"cat\": " << json_string(e.category)
          << ", \"ph\": \"X\", \"ts\": " << json_number(e.ts_us)
          << ", \"dur\": " << json_number(e.dur_us) << ", \"pid\": " << e.pid
          << ", \"tid\": " << e.tid << ", \"args\": {";
    for (size_t k = 0; k < e.args.size(); ++k)
      o << (k ? ", " : "") << json_string(e.args[k].first) << ": " << e.args[k].second;
    o << "}}";
  }
  o << "\n], \"displayTimeUnit\": \"ms\", \"metadata\": {";
  for (size_t k = 0; k < trace.metadata.size(); ++k)
    o << (k ? ", " : "") << json_string(trace.metadata[k].first) << ": "
      << trace.metadata[k].second;
  o << "}}\n";
  return o.str();
}

Status write_text_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path temp = target.string() + ".tmp-" + std::to_string(current_process_id());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return invalid_input("cannot write '" + path + "'");
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      return invalid_input("cannot write '" + path + "' (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return invalid_input("cannot write '" + path + "': " + ec.message());
  }
  return Status::ok();
}

int64_t current_thread_id() { return static_cast<int64_t>(::syscall(SYS_gettid)); }
int64_t current_process_id() { return static_cast<int64_t>(::getpid()); }

}  // namespace peregrine::profiler
