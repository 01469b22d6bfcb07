// Schemas of the reduce family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_reduce_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
