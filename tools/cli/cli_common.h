// Shared pieces of the CLI: a strict flag parser (unknown flags are errors) and
// the subcommand signature.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "peregrine/session.h"
#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine::cli {

// Parses "--flag value" / "--flag=value" / "--switch" against a declared set.
class Args {
 public:
  Args(std::string command, std::string usage) : command_(std::move(command)), usage_(std::move(usage)) {}
  void flag(const std::string& name, const std::string& help, bool repeated = false);
  void toggle(const std::string& name, const std::string& help);
  Status parse(int argc, char** argv);  // argv after the subcommand

  bool help_requested() const { return help_; }
  std::string help_text() const;
  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> get_all(const std::string& name) const;
  bool is_set(const std::string& name) const { return toggles_.count(name) > 0; }

 private:
  struct Spec { std::string help; bool is_toggle; bool repeated; };
  std::string command_, usage_;
  std::map<std::string, Spec> specs_;
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> values_;
  std::map<std::string, bool> toggles_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// "1x3x224x224" or "1,3,224,224" -> dims.
Expected<Shape> parse_dims(const std::string& text);
// "NAME=VALUE" -> pair.
Expected<std::pair<std::string, std::string>> split_assignment(const std::string& text,
                                                               const std::string& flag);
Expected<int64_t> parse_int(const std::string& text, const std::string& flag);
// "512M", "8G", "4096" (bytes; K / M / G and KiB / MiB / GiB are powers of 1024).
Expected<int64_t> parse_size(const std::string& text, const std::string& flag);

int print_error(const Status& st);

// How the engine prepares and runs a model: --opt-level (also -O0..-O3), --disable-pass,
// --backend, --threads.
void add_engine_flags(Args* args);
Status parse_engine_flags(const Args& args, SessionOptions* options);
// Rewrites the short forms -O0..-O3 into --opt-level=N (main() does this for every command).
std::vector<std::string> expand_short_flags(int argc, char** argv);  // prints "error: ..." and returns the exit code

int cmd_run(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_profile(int argc, char** argv);
int cmd_machine(int argc, char** argv);
int cmd_runs(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_compile(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_compare_precision(int argc, char** argv);
int cmd_sweep(int argc, char** argv);

}  // namespace peregrine::cli
