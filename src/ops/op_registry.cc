#include "ops/op_list.h"
#include "ops/op_schema.h"

namespace peregrine {

void SchemaRegistry::add(OpSchema schema) {
  auto key = std::make_pair(schema.domain, schema.op_type);
  schemas_[key] = std::move(schema);
}

const OpSchema* SchemaRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  auto it = schemas_.find({d, op_type});
  return it == schemas_.end() ? nullptr : &it->second;
}

const SchemaRegistry& SchemaRegistry::global() {
  static const SchemaRegistry registry = [] {
    SchemaRegistry r;
    register_all_schemas(r);
    return r;
  }();
  return registry;
}

double static_bytes(const ir::ValueType& t) {
  if (!t.is_static()) return 0;
  double n = 1;
  for (int64_t d : t.dims) n *= static_cast<double>(d);
  return n * static_cast<double>(dtype_size(t.dtype));
}

OpCost default_cost(const std::vector<ir::ValueType>& inputs,
                    const std::vector<ir::ValueType>& outputs) {
  OpCost c;
  for (const auto& t : inputs) c.bytes_read += static_bytes(t);
  for (const auto& t : outputs) c.bytes_written += static_bytes(t);
  return c;
}

}  // namespace peregrine
