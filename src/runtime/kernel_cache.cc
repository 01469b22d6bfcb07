#include "runtime/kernel_cache.h"

#include <cstring>

namespace peregrine {

namespace {

uint64_t mix(uint64_t h, uint64_t v, uint64_t k) {
  h ^= v * k;
  h = (h << 31) | (h >> 33);
  h *= 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

void append_int(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void append_string(std::string& key, const std::string& s) {
  append_int(key, static_cast<int64_t>(s.size()));
  key += s;
}

// A tensor's dtype, shape and contents; false for tensors not shared (strings, no data).
bool append_tensor(std::string& key, const Tensor& t) {
  if (t.dtype() == DType::kString || (t.raw() == nullptr && t.numel() > 0)) return false;
  append_int(key, static_cast<int64_t>(t.dtype()));
  append_int(key, t.rank());
  for (int64_t d : t.shape()) append_int(key, d);
  key += digest_bytes(t.raw(), t.nbytes());
  if (const QuantParams* q = t.quant()) {
    append_int(key, q->axis);
    key += digest_bytes(q->scales.data(), q->scales.size() * sizeof(float));
    key += digest_bytes(q->zero_points.data(), q->zero_points.size() * sizeof(int64_t));
  }
  return true;
}

bool append_attribute(std::string& key, const ir::Attribute& a) {
  using Type = ir::Attribute::Type;
  append_string(key, a.name);
  append_int(key, static_cast<int64_t>(a.type));
  switch (a.type) {
    case Type::kFloat: {
      uint32_t bits;
      std::memcpy(&bits, &a.f, sizeof(bits));
      append_int(key, bits);
      return true;
    }
    case Type::kInt:
      append_int(key, a.i);
      return true;
    case Type::kString:
      append_string(key, a.s);
      return true;
    case Type::kFloats:
      append_int(key, static_cast<int64_t>(a.floats.size()));
      key += digest_bytes(a.floats.data(), a.floats.size() * sizeof(float));
      return true;
    case Type::kInts:
      append_int(key, static_cast<int64_t>(a.ints.size()));
      for (int64_t v : a.ints) append_int(key, v);
      return true;
    case Type::kStrings:
      append_int(key, static_cast<int64_t>(a.strings.size()));
      for (const auto& s : a.strings) append_string(key, s);
      return true;
    case Type::kTensor:
      return append_tensor(key, a.t);
    case Type::kTensors:
      append_int(key, static_cast<int64_t>(a.tensors.size()));
      for (const Tensor& t : a.tensors)
        if (!append_tensor(key, t)) return false;
      return true;
    case Type::kTypeProto:
      append_string(key, a.type_proto.to_string());
      return true;
    case Type::kGraph:
    case Type::kGraphs:
      return false;  // subgraphs: not shared
  }
  return false;
}

}  // namespace

std::string digest_bytes(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t a = 0x243f6a8885a308d3ULL ^ size, b = 0x13198a2e03707344ULL + size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    a = mix(a, v, 0xff51afd7ed558ccdULL);
    b = mix(b, v, 0xc4ceb9fe1a85ec53ULL);
  }
  uint64_t tail = 0;
  if (i < size) std::memcpy(&tail, p + i, size - i);
  a = mix(a, tail, 0xff51afd7ed558ccdULL);
  b = mix(b, tail ^ 0x5bd1e995ULL, 0xc4ceb9fe1a85ec53ULL);
  std::string out(16, '\0');
  std::memcpy(out.data(), &a, 8);
  std::memcpy(out.data() + 8, &b, 8);
  return out;
}

std::optional<std::string> KernelCache::key_of(const std::string& backend_name,
                                               const ir::Node& node,
                                               const std::vector<ir::ValueType>& input_types,
                                               const std::vector<const Tensor*>& constants) {
  std::string key;
  append_string(key, backend_name);
  append_string(key, node.domain);
  append_string(key, node.op_type);
  append_int(key, node.opset);
  append_int(key, static_cast<int64_t>(node.precision));
  // Which inputs and outputs are present: kernels read optional operands by position.
  append_int(key, static_cast<int64_t>(node.inputs.size()));
  for (const auto& in : node.inputs) append_int(key, in.empty() ? 0 : 1);
  append_int(key, static_cast<int64_t>(node.outputs.size()));
  for (const auto& out : node.outputs) append_int(key, out.empty() ? 0 : 1);
  append_int(key, static_cast<int64_t>(node.attributes.size()));
  for (const auto& [name, attr] : node.attributes)
    if (!append_attribute(key, attr)) return std::nullopt;
  // Input dtypes pick the kernel table's row; shapes of non-constant inputs do not matter.
  for (const ir::ValueType& t : input_types) {
    append_int(key, static_cast<int64_t>(t.kind));
    append_int(key, static_cast<int64_t>(t.dtype));
  }
  for (const Tensor* c : constants) {
    append_int(key, c ? 1 : 0);
    if (c && !append_tensor(key, *c)) return std::nullopt;
  }
  return key;
}

KernelCache::Entry KernelCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return {};
  ++hits_;
  return it->second;
}

void KernelCache::insert(const std::string& key, Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Kernels no session holds any more (their plans were evicted) go: the cache keeps the
  // weights of live plans once, not of every plan ever compiled.
  std::erase_if(entries_, [](const auto& e) { return e.second.kernel.use_count() == 1; });
  entries_.emplace(key, std::move(entry));
}

int64_t KernelCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

int64_t KernelCache::kernels() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(entries_.size());
}

}  // namespace peregrine
