// Schemas of the normalization family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_normalization_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
