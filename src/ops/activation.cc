// Schemas of the activation family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_activation_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
