// peregrine run MODEL: runs a model once and writes each output as DIR/<name>.npy.
#include <cstdio>
#include <filesystem>
#include <set>

#include "io/npy.h"
#include "peregrine/session.h"
#include "cli_common.h"
#include "model_inputs.h"

namespace peregrine::cli {

namespace {

// Characters outside [A-Za-z0-9._-] become '_' so a tensor name is a safe file name.
std::string safe_file_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args("run", "MODEL [options]");
  add_model_input_flags(&args);
  add_engine_flags(&args);
  args.flag("output-dir", "where to write <output>.npy (default: peregrine_outputs)");
  args.toggle("overwrite", "replace .npy files that already exist in the output folder");
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine run: expected exactly one MODEL argument"));

  SessionOptions options;
  uint64_t seed = 0;
  std::map<std::string, Tensor> given;
  st = parse_model_input_flags(args, &options, &given, &seed);
  if (st.is_ok()) st = parse_engine_flags(args, &options);
  if (!st.is_ok()) return print_error(st);

  auto session = Session::load(args.positional()[0], options);
  if (!session.is_ok()) return print_error(session.status());
  auto inputs = make_model_inputs(**session, given, seed);
  if (!inputs.is_ok()) return print_error(inputs.status());
  auto outputs = (*session)->run(*inputs);
  if (!outputs.is_ok()) return print_error(outputs.status());

  std::filesystem::path dir = args.get("output-dir", "peregrine_outputs");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return print_error(invalid_input("cannot create output folder '" + dir.string() + "'"));
  std::set<std::string> used;
  for (const auto& info : (*session)->outputs()) {
    std::string file = safe_file_name(info.name);
    for (int k = 1; used.count(file); ++k) file = safe_file_name(info.name) + "_" + std::to_string(k);
    used.insert(file);
    std::filesystem::path path = dir / (file + ".npy");
    if (std::filesystem::exists(path) && !args.is_set("overwrite"))
      return print_error(invalid_input("'" + path.string() +
                                       "' already exists; pass --overwrite to replace it"));
    const Tensor& t = outputs->at(info.name);
    Status w = write_npy(path.string(), t);
    if (!w.is_ok()) return print_error(w.with_context("output '" + info.name + "'"));
    std::printf("%s: %s %s -> %s\n", info.name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
                shape_to_string(t.shape()).c_str(), path.c_str());
  }
  return 0;
}

}  // namespace peregrine::cli
