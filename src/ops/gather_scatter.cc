// Schemas of the gather_scatter family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_gather_scatter_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
