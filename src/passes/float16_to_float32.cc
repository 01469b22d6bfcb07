// float16_to_float32
//   Matches:  a graph holding float16 or bfloat16 values (a model exported after .half(), or
//             converted to float16 weights), none of them inside a subgraph.
//   Produces: the same graph computing in float32: 16-bit initializers and Constant /
//             ConstantOfShape values widened, Cast / EyeLike / Random* / Bernoulli targets of a
//             16-bit float retargeted to float32, every 16-bit value typed float32. Graph
//             inputs and outputs keep their declared types: a Cast after each such input and
//             before each such output converts at the boundary (the outputs are rounded to
//             their 16-bit type once, at the end).
//   Why:      the CPU backend's kernels compute in float32 (F16C-free, AVX2 / AVX-512 FMA);
//             16-bit nodes would run on the reference kernels. Every intermediate keeps float32
//             precision, so results are at least as accurate as a 16-bit evaluation; weights
//             take float32's memory.
//   Preconditions: none of the narrow values is read or written inside a subgraph, nor by a
//             quantization op (QuantizeLinear, DequantizeLinear, QLinearMatMul, QLinearConv,
//             DynamicQuantizeLinear round in their scale's type); the pass leaves such graphs
//             unchanged. A value that is both a graph input and a graph output keeps its type.
#include <set>
#include <string>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "peregrine/float_types.h"

namespace peregrine::passes {

namespace {

bool narrow(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

bool narrow_type(const ir::ValueType& t) {
  if (t.is_tensor()) return narrow(t.dtype);
  return t.elem && narrow_type(*t.elem);
}

void widen_type(ir::ValueType& t) {
  if (t.is_tensor()) {
    if (narrow(t.dtype)) t.dtype = DType::kFloat32;
    return;
  }
  if (t.elem) {
    auto elem = std::make_shared<ir::ValueType>(*t.elem);
    widen_type(*elem);
    t.elem = elem;
  }
}

Tensor widen(const Tensor& t) {
  Tensor out = Tensor::zeros(DType::kFloat32, t.shape());
  const auto* src = t.data<uint16_t>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    dst[i] = t.dtype() == DType::kFloat16 ? Float16::to_float(src[i])
                                            : bits_float(static_cast<uint32_t>(src[i]) << 16);
  return out;
}

bool holds_narrow(const ir::Graph& g);

// A subgraph of some node of `g` (If / Loop / Scan bodies) holds a 16-bit float.
bool subgraphs_hold_narrow(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    for (const auto& [key, a] : n->attributes) {
      if (a.type == ir::Attribute::Type::kGraph && a.g && holds_narrow(*a.g)) return true;
      for (const auto& sub : a.graphs)
        if (sub && holds_narrow(*sub)) return true;
    }
  return false;
}

bool holds_narrow(const ir::Graph& g) {
  for (const auto& [name, v] : g.values)
    if (narrow_type(v.type) || (v.initializer && narrow(v.initializer->dtype()))) return true;
  for (const auto& n : g.nodes)
    for (const auto& [key, a] : n->attributes)
      if (a.type == ir::Attribute::Type::kTensor && narrow(a.t.dtype())) return true;
  return subgraphs_hold_narrow(g);
}

// Quantization ops round in their scale's type: a 16-bit scale widened to float32 moves some
// integer results by one step, so graphs where they meet 16-bit floats keep their types.
bool quantizes_narrow(const ir::Graph& g) {
  static const std::set<std::string> kQuantizing = {"QuantizeLinear", "DequantizeLinear",
                                                    "QLinearMatMul", "QLinearConv",
                                                    "DynamicQuantizeLinear"};
  for (const auto& n : g.nodes) {
    if (!n->domain.empty() || !kQuantizing.count(n->op_type)) continue;
    for (const auto* names : {&n->inputs, &n->outputs})
      for (const auto& v : *names) {
        const ir::Value* val = v.empty() ? nullptr : g.find_value(v);
        if (val && narrow_type(val->type)) return true;
      }
  }
  return false;
}


// Attributes that name an output element type.
void retarget_attributes(ir::Node& n) {
  if (!n.domain.empty()) return;
  for (auto& [key, a] : n.attributes) {
    if (a.type == ir::Attribute::Type::kTensor && narrow(a.t.dtype()) &&
        (n.op_type == "Constant" || n.op_type == "ConstantOfShape"))
      a.t = widen(a.t);
    const bool type_attr = (key == "to" && n.op_type == "Cast") ||
                           (key == "dtype" && n.op_type != "Cast");
    if (type_attr && a.type == ir::Attribute::Type::kInt && narrow(static_cast<DType>(a.i)))
      a.i = static_cast<int64_t>(DType::kFloat32);
  }
}

class Float16ToFloat32 : public Pass {
 public:
  const char* name() const override { return "float16_to_float32"; }
  Expected<bool> run(ir::Graph& g) override {
    if (!holds_narrow(g) || subgraphs_hold_narrow(g) || quantizes_narrow(g)) return false;
    const std::set<std::string> inputs(g.inputs.begin(), g.inputs.end());
    const std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
    // The boundary: each narrow graph input gets a widening Cast its readers read instead.
    std::vector<std::pair<std::string, std::string>> input_casts;  // input -> its float32 copy
    for (const auto& in : g.inputs) {
      const ir::ValueType t = g.values[in].type;
      if (!t.is_tensor() || !narrow(t.dtype) || outputs.count(in)) continue;
      const std::string wide = fresh_name(g, in + "_float32");
      ir::ValueType wide_type = t;
      wide_type.dtype = DType::kFloat32;
      g.value(wide).type = wide_type;
      replace_uses(g, in, wide);
      input_casts.push_back({in, wide});
    }
    // Each narrow graph output is written as a float32 value and narrowed by a Cast.
    std::vector<std::tuple<std::string, std::string, DType>> output_casts;  // wide, output, type
    for (const auto& out : g.outputs) {
      ir::Value& v = g.values[out];
      if (!v.type.is_tensor() || !narrow(v.type.dtype) || inputs.count(out)) continue;
      const std::string wide = fresh_name(g, out + "_float32");
      g.value(wide).type = v.type;
      if (v.initializer) {
        g.values[wide].initializer = v.initializer;
      } else {
        for (auto& n : g.nodes)
          for (auto& o : n->outputs)
            if (o == out) o = wide;
      }
      replace_uses(g, out, wide);
      output_casts.push_back({wide, out, v.type.dtype});
    }
    std::set<std::string> boundary(g.inputs.begin(), g.inputs.end());
    for (const auto& [wide, out, type] : output_casts) boundary.insert(out);
    for (auto& [name, v] : g.values) {
      if (boundary.count(name)) continue;
      if (v.initializer && narrow(v.initializer->dtype())) v.initializer = widen(*v.initializer);
      widen_type(v.type);
    }
    for (auto& n : g.nodes) retarget_attributes(*n);
    for (const auto& [in, wide] : input_casts)
      add_node(g, "Cast", {in}, {wide}, in + "_to_float32")->attributes["to"] =
          int_attr("to", static_cast<int64_t>(DType::kFloat32));
    for (const auto& [wide, out, type] : output_casts) {
      if (g.values[out].initializer) g.values[out].initializer.reset();
      add_node(g, "Cast", {wide}, {out}, out + "_from_float32")->attributes["to"] =
          int_attr("to", static_cast<int64_t>(type));
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_float16_to_float32() { return std::make_unique<Float16ToFloat32>(); }

}  // namespace peregrine::passes
