// peregrine run MODEL: runs a model once and writes each output as DIR/<name>.npy.
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include "io/npy.h"
#include "peregrine/session.h"
#include "cli_common.h"

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

// Seeded random values: floats uniform in [-1, 1), integers in [0, 10), bools fair.
Expected<Tensor> random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  PG_ASSIGN_OR_RETURN(Tensor t, Tensor::make(dtype, shape));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32: t.data<float>()[i] = static_cast<float>(real(rng)); break;
      case DType::kFloat64: t.data<double>()[i] = real(rng); break;
      case DType::kFloat16: t.data<Float16>()[i] = Float16(static_cast<float>(real(rng))); break;
      case DType::kBFloat16: t.data<BFloat16>()[i] = BFloat16(static_cast<float>(real(rng))); break;
      case DType::kBool: t.data<bool>()[i] = small(rng) < 5; break;
      case DType::kInt64: t.data<int64_t>()[i] = small(rng); break;
      case DType::kInt32: t.data<int32_t>()[i] = small(rng); break;
      case DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(small(rng)); break;
      case DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(small(rng)); break;
      default:
        return unsupported("cannot generate random " + std::string(dtype_name(dtype)) +
                           " inputs; pass the input with --input");
    }
  }
  return t;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args("run", "MODEL [options]");
  args.flag("input", "NAME=FILE.npy: value of an input (repeatable); others are random", true);
  args.flag("shape", "NAME=DIMS: fix an input's shape, e.g. data=1x3x224x224 (repeatable)", true);
  args.flag("output-dir", "where to write <output>.npy (default: peregrine_outputs)");
  args.flag("seed", "seed of the random inputs (default: 0)");
  args.flag("threads", "worker threads (default: 1)");
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
  for (const auto& s : args.get_all("shape")) {
    auto kv = split_assignment(s, "shape");
    if (!kv.is_ok()) return print_error(kv.status());
    auto dims = parse_dims(kv->second);
    if (!dims.is_ok()) return print_error(dims.status());
    options.input_shapes[kv->first] = *dims;
  }
  uint64_t seed = 0;
  if (args.has("seed")) {
    auto v = parse_int(args.get("seed"), "seed");
    if (!v.is_ok()) return print_error(v.status());
    seed = static_cast<uint64_t>(*v);
  }
  if (args.has("threads")) {
    auto v = parse_int(args.get("threads"), "threads");
    if (!v.is_ok()) return print_error(v.status());
    if (*v < 1 || *v > 1024) return print_error(invalid_input("--threads must be in 1..1024"));
    options.num_threads = static_cast<int>(*v);
  }
  std::map<std::string, Tensor> given;
  for (const auto& s : args.get_all("input")) {
    auto kv = split_assignment(s, "input");
    if (!kv.is_ok()) return print_error(kv.status());
    auto t = read_npy(kv->second);
    if (!t.is_ok()) return print_error(t.status());
    given[kv->first] = std::move(t).value();
  }

  auto session = Session::load(args.positional()[0], options);
  if (!session.is_ok()) return print_error(session.status());
  for (const auto& [name, t] : given) {
    bool known = false;
    for (const auto& info : (*session)->inputs()) known |= info.name == name;
    if (!known) return print_error(invalid_input("--input: '" + name + "' is not an input of the model"));
  }
  std::mt19937_64 rng(seed);
  std::map<std::string, Tensor> inputs;
  for (const auto& info : (*session)->inputs()) {
    if (given.count(info.name)) {
      inputs[info.name] = given[info.name];
      continue;
    }
    if (!info.is_tensor)
      return print_error(unsupported("input '" + info.name + "' is " + info.type +
                                     "; random values only for tensors"));
    Shape shape = info.shape;
    for (auto& d : shape)
      if (d < 0) {
        std::fprintf(stderr, "note: input '%s' has an unknown dim; using 1 (fix it with --shape)\n",
                     info.name.c_str());
        d = 1;
      }
    auto t = random_tensor(info.dtype, shape, rng);
    if (!t.is_ok()) return print_error(t.status().with_context("input '" + info.name + "'"));
    inputs[info.name] = std::move(t).value();
  }
  auto outputs = (*session)->run(inputs);
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
