// Schemas of the conv family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_conv_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
