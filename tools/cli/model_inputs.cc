#include "model_inputs.h"

#include <cstdio>

#include "io/npy.h"

namespace peregrine::cli {

void add_model_input_flags(Args* args) {
  args->flag("input", "NAME=FILE.npy: value of an input (repeatable); others are random", true);
  args->flag("shape", "NAME=DIMS: fix an input's shape, e.g. data=1x3x224x224 (repeatable)", true);
  args->flag("shape-profile",
             "NAME=MIN:OPT:MAX: the shapes an input may take, e.g. "
             "image=1x3x224x224:1x3x640x640:1x3x1024x1024; without --shape it runs at OPT "
             "(repeatable)",
             true);
  args->flag("seed", "seed of the random inputs (default: 0)");
}

Expected<std::pair<std::string, ShapeProfile>> parse_shape_profile(const std::string& text) {
  PG_ASSIGN_OR_RETURN(auto kv, split_assignment(text, "shape-profile"));
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = kv.second.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(kv.second.substr(start, colon - start));
  parts.push_back(kv.second.substr(start));
  if (parts.size() != 3)
    return invalid_input("--shape-profile '" + text + "': expected NAME=MIN:OPT:MAX");
  ShapeProfile p;
  PG_ASSIGN_OR_RETURN(p.min, parse_dims(parts[0]));
  PG_ASSIGN_OR_RETURN(p.opt, parse_dims(parts[1]));
  PG_ASSIGN_OR_RETURN(p.max, parse_dims(parts[2]));
  return std::make_pair(kv.first, std::move(p));
}

Status parse_model_input_flags(const Args& args, SessionOptions* options,
                               std::map<std::string, Tensor>* given, uint64_t* seed) {
  *seed = 0;
  if (args.has("seed")) {
    PG_ASSIGN_OR_RETURN(int64_t v, parse_int(args.get("seed"), "seed"));
    *seed = static_cast<uint64_t>(v);
  }
  for (const auto& s : args.get_all("shape")) {
    PG_ASSIGN_OR_RETURN(auto kv, split_assignment(s, "shape"));
    PG_ASSIGN_OR_RETURN(Shape dims, parse_dims(kv.second));
    options->input_shapes[kv.first] = dims;
  }
  for (const auto& s : args.get_all("input")) {
    PG_ASSIGN_OR_RETURN(auto kv, split_assignment(s, "input"));
    PG_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    (*given)[kv.first] = std::move(t);
  }
  for (const auto& s : args.get_all("shape-profile")) {
    PG_ASSIGN_OR_RETURN(auto profile, parse_shape_profile(s));
    // The session checks the range against the model and the inputs against the range; random
    // inputs take OPT unless --shape gives their shape (a file brings its own).
    if (!given->count(profile.first))
      options->input_shapes.try_emplace(profile.first, profile.second.opt);
    options->shape_profiles[profile.first] = std::move(profile.second);
  }
  return Status::ok();
}

Expected<Tensor> random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  PG_ASSIGN_OR_RETURN(Tensor t, Tensor::make(dtype, shape));
  // One draw from the seeded engine, then splitmix64 per element: a declared input of 2^31
  // elements fills in seconds (the engine and a distribution per element took a minute).
  uint64_t state = rng();
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto real = [&] { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; };  // [-1, 1)
  auto small = [&] { return static_cast<int>((next() >> 32) % 10); };                 // [0, 10)
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::kFloat32: for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(real()); break;
    case DType::kFloat64: for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = real(); break;
    case DType::kFloat16: for (int64_t i = 0; i < n; ++i) t.data<Float16>()[i] = Float16(static_cast<float>(real())); break;
    case DType::kBFloat16: for (int64_t i = 0; i < n; ++i) t.data<BFloat16>()[i] = BFloat16(static_cast<float>(real())); break;
    case DType::kBool: for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = small() < 5; break;
    case DType::kInt64: for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = small(); break;
    case DType::kInt32: for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = small(); break;
    case DType::kInt8: for (int64_t i = 0; i < n; ++i) t.data<int8_t>()[i] = static_cast<int8_t>(small()); break;
    case DType::kUInt8: for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(small()); break;
    default:
      return unsupported("cannot generate random " + std::string(dtype_name(dtype)) +
                         " inputs; pass the input with --input");
  }
  return t;
}

Expected<std::map<std::string, Tensor>> make_model_inputs(const Session& session,
                                                          const std::map<std::string, Tensor>& given,
                                                          uint64_t seed) {
  for (const auto& [name, t] : given) {
    bool known = false;
    for (const auto& info : session.inputs()) known |= info.name == name;
    if (!known) return invalid_input("--input: '" + name + "' is not an input of the model");
  }
  std::mt19937_64 rng(seed);
  std::map<std::string, Tensor> inputs;
  for (const auto& info : session.inputs()) {
    if (auto it = given.find(info.name); it != given.end()) {
      inputs[info.name] = it->second;
      continue;
    }
    if (!info.is_tensor)
      return unsupported("input '" + info.name + "' is " + info.type +
                         "; random values only for tensors");
    Shape shape = info.shape;
    for (auto& d : shape)
      if (d < 0) {
        std::fprintf(stderr, "note: input '%s' has an unknown dim; using 1 (fix it with --shape)\n",
                     info.name.c_str());
        d = 1;
      }
    auto t = random_tensor(info.dtype, shape, rng);
    if (!t.is_ok()) return t.status().with_context("input '" + info.name + "'");
    inputs[info.name] = std::move(t).value();
  }
  return inputs;
}

std::string describe_input_shapes(const std::map<std::string, Tensor>& inputs) {
  std::string out;
  for (const auto& [name, t] : inputs) {
    if (!out.empty()) out += ";";
    out += name + "=";
    for (size_t i = 0; i < t.shape().size(); ++i) out += (i ? "x" : "") + std::to_string(t.shape()[i]);
  }
  return out;
}

}  // namespace peregrine::cli
