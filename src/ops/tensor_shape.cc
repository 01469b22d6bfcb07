// Schemas of the tensor_shape family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_tensor_shape_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
