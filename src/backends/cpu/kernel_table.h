// The CPU backend's kernel table: every op it claims, in one list, and the one place a reader
// finds which kernel runs a node and why. A row names the op (domain, type, opset range), the
// dtypes it takes, an optional static claim check (attributes the kernel needs) and the prepare
// function that builds the kernel, with the file it lives in. Nodes no row claims run on the
// reference backend; a prepared kernel that meets a case it does not handle at run time (a
// dtype, rank or value it has no path for) runs the reference kernel of the same op.
//
// The choice among a kernel's algorithms (im2col / Winograd / indirect conv, which depthwise
// kernel, the ISA level) is made in prepare from shapes and selected_isa(), and is visible as
// the kernel's name() in `peregrine inspect --kernels` and `peregrine profile`.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"

namespace peregrine::cpu {

// Which input dtypes a row takes; a statically known mismatch sends the node to the reference
// backend when the plan is made.
enum class DTypeRule {
  kAny,            // data movement: bytes are copied, the dtype does not matter
  kFloat32,        // every tensor input float32
  kFloat32Data,    // input 0 float32; later inputs are parameters (axes, bounds) of any dtype
  kFloat32Or8Bit,  // input 0 float32, uint8 or int8 (order-only ops on quantized values)
  kQuantized,      // integer kernels: any dtype (checked by the kernel), and prepare is given
                   // initializers of every dtype (other rows see float32 ones only)
};

struct CpuPrepareArgs {
  const ir::Node& node;
  // Per input: its value when it is a float32 initializer (for weight packing), else nullptr;
  // kQuantized rows: any initializer.
  const std::vector<const Tensor*>& constants;
  const FusedEpilogue& fused;  // peregrine.Fused* epilogue (none for plain ops)
};

using CpuPrepareFn = Expected<std::unique_ptr<PreparedKernel>> (*)(const CpuPrepareArgs&);

struct CpuKernelEntry {
  std::string_view domain;  // "" = the ONNX domain (also spelled "ai.onnx"), or "peregrine"
  std::string_view op;
  int min_opset, max_opset;  // ONNX opsets of the node; peregrine-domain ops are opset 1
  DTypeRule dtypes;
  bool (*claim)(const ir::Node&);  // further static checks, or nullptr: every such node
  CpuPrepareFn prepare;
  std::string_view source;  // where the kernel lives, under src/backends/cpu/
};

// Every row, in table order.
std::span<const CpuKernelEntry> cpu_kernel_table();
// The first row that claims `node` (op, domain, opset, claim check) and, when `input_types` is
// given, whose dtype rule its statically known input dtypes meet; nullptr when none does.
const CpuKernelEntry* find_cpu_kernel(const ir::Node& node,
                                      const std::vector<ir::ValueType>* input_types = nullptr);

}  // namespace peregrine::cpu
