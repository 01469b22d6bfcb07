// Schemas of the pool family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_pool_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
