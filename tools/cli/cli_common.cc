#include "cli_common.h"

#include <cstdio>
#include <sstream>

#include "runtime/backend_registry.h"

namespace peregrine::cli {

void Args::flag(const std::string& name, const std::string& help, bool repeated) {
  specs_[name] = {help, false, repeated};
  order_.push_back(name);
}

void Args::toggle(const std::string& name, const std::string& help) {
  specs_[name] = {help, true, false};
  order_.push_back(name);
}

Status Args::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end())
      return invalid_input("peregrine " + command_ + ": unknown flag '--" + name + "' (see --help)");
    if (it->second.is_toggle) {
      if (has_value) return invalid_input("--" + name + " takes no value");
      toggles_[name] = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return invalid_input("--" + name + " needs a value");
      value = argv[++i];
    }
    if (!it->second.repeated && values_.count(name))
      return invalid_input("--" + name + " given more than once");
    values_[name].push_back(value);
  }
  return Status::ok();
}

std::string Args::help_text() const {
  std::ostringstream o;
  o << "usage: peregrine " << command_ << " " << usage_ << "\n\noptions:\n";
  for (const auto& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = "--" + name + (s.is_toggle ? "" : " VALUE");
    o << "  " << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << s.help << "\n";
  }
  o << "  --help                    show this help\n";
  return o.str();
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Expected<Shape> parse_dims(const std::string& text) {
  Shape dims;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty() || cur.size() > 12 || cur.find_first_not_of("0123456789") != std::string::npos)
      return invalid_input("bad dims '" + text + "' (expected e.g. 1x3x224x224)");
    dims.push_back(std::stoll(cur));
    cur.clear();
    return Status::ok();
  };
  if (text == "scalar" || text.empty()) return dims;
  for (char c : text) {
    if (c == 'x' || c == ',') {
      PG_RETURN_IF_ERROR(flush());
    } else {
      cur += c;
    }
  }
  PG_RETURN_IF_ERROR(flush());
  return dims;
}

Expected<std::pair<std::string, std::string>> split_assignment(const std::string& text,
                                                               const std::string& flag) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return invalid_input("--" + flag + " expects NAME=VALUE, got '" + text + "'");
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Expected<int64_t> parse_int(const std::string& text, const std::string& flag) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return invalid_input("--" + flag + " expects a non-negative integer, got '" + text + "'");
  return std::stoll(text);
}

void add_engine_flags(Args* args) {
  args->flag("opt-level", "graph optimization level 0..3 (also -O0..-O3; default 2): 0 none, "
                          "1 cleanup, 2 cleanup + fusion, 3 = 2 + NHWC conv layout");
  args->flag("disable-pass", "NAME: skip a graph pass (repeatable; see 'peregrine compile --help')", true);
  args->flag("backend", backend_choices_text());
  args->flag("threads", "worker threads (default: 1)");
  args->flag("precision", "compute precision of Conv / ConvTranspose / MatMul / Gemm nodes: fp32 "
                          "(default) or bf16 (AVX512_BF16; the rest stays fp32)");
  args->flag("keep-fp32", "NODE|OP_TYPE: keep a node or an op type in fp32 (repeatable)", true);
  args->flag("memory-limit", "SIZE: most memory the model's static tensors may need, e.g. 8G, "
                             "512M (default: three quarters of physical memory; 0: no limit)");
}

Expected<int64_t> parse_size(const std::string& text, const std::string& flag) {
  const size_t digits = text.find_first_not_of("0123456789");
  const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "KiB") shift = 10;
  if (unit == "M" || unit == "MiB") shift = 20;
  if (unit == "G" || unit == "GiB") shift = 30;
  if (digits == 0 || shift < 0 || digits > 12)
    return invalid_input("--" + flag + " expects a size such as 512M or 8G, got '" + text + "'");
  return std::stoll(text.substr(0, digits)) << shift;
}

Status parse_engine_flags(const Args& args, SessionOptions* options) {
  if (args.has("opt-level")) {
    std::string v = args.get("opt-level");
    if (v.size() != 1 || v[0] < '0' || v[0] > '3')
      return invalid_input("--opt-level must be 0, 1, 2 or 3, got '" + v + "'");
    options->opt_level = v[0] - '0';
  }
  options->disabled_passes = args.get_all("disable-pass");
  if (args.has("precision")) {
    PG_ASSIGN_OR_RETURN(options->precision, parse_precision(args.get("precision")));
  }
  options->keep_fp32 = args.get_all("keep-fp32");
  if (args.has("backend")) {
    options->backend = args.get("backend");
    PG_RETURN_IF_ERROR(backends_for(options->backend).status());  // names the known ones
  }
  if (args.has("memory-limit")) {
    PG_ASSIGN_OR_RETURN(int64_t limit, parse_size(args.get("memory-limit"), "memory-limit"));
    options->memory_limit_bytes = limit == 0 ? -1 : limit;
  }
  if (args.has("threads")) {
    PG_ASSIGN_OR_RETURN(int64_t threads, parse_int(args.get("threads"), "threads"));
    if (threads < 1 || threads > 1024) return invalid_input("--threads must be in 1..1024");
    options->num_threads = static_cast<int>(threads);
  }
  return Status::ok();
}

std::vector<std::string> expand_short_flags(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '9')
      out.push_back("--opt-level=" + a.substr(2));
    else
      out.push_back(a);
  }
  return out;
}

int print_error(const Status& st) {
  std::fprintf(stderr, "error: %s\n", st.message().c_str());
  return st.exit_code();
}

}  // namespace peregrine::cli
