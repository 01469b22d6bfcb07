// Prepared kernels shared between sessions compiled from one model: the per-shape plans of a
// Python session (python/src/peregrine_module.cc) or plans a caller compiles for several input
// shapes. A node whose backend, op, opset, attributes, precision, input dtypes and constant
// inputs (dtype, shape and contents) match a node prepared before takes that kernel, packed
// weights included, instead of packing its own copy: a new shape plan then costs its graph
// passes and arena, not a second copy of the weights.
//
// Sharing is sound because a prepared kernel depends on nothing else: CPU kernels are prepared
// from the node, its constants and its fused epilogue (backends/cpu/cpu_backend.cc), never from
// the non-constant inputs' shapes, and handle any shape at run time (the dynamic plan runs
// them on every shape). A shared kernel keeps its per-node mutex shared too, so runs of
// different plans never enter one kernel at once. Nodes with subgraphs, string constants and
// constants whose data is already freed are not shared.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace peregrine {

class KernelCache {
 public:
  struct Entry {
    std::shared_ptr<PreparedKernel> kernel;
    std::shared_ptr<std::mutex> mutex;  // one run in the kernel at a time, across plans
  };

  // What identifies the kernel `backend_name` would prepare for `node`; nullopt where the node
  // is not shared (see above).
  static std::optional<std::string> key_of(const std::string& backend_name, const ir::Node& node,
                                           const std::vector<ir::ValueType>& input_types,
                                           const std::vector<const Tensor*>& constants);

  // The entry prepared under `key`, or an empty one.
  Entry find(const std::string& key);
  // Adds an entry, first dropping the kernels only the cache still holds.
  void insert(const std::string& key, Entry entry);

  int64_t hits() const;     // nodes that took a kernel prepared before
  int64_t kernels() const;  // kernels held

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  int64_t hits_ = 0;
};

// A 128-bit digest of `size` bytes (two independent 64-bit multiply-mix lanes over 8-byte
// words): tells weights apart, not built to resist a forger.
std::string digest_bytes(const void* data, size_t size);

}  // namespace peregrine
