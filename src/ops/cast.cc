// Schemas of the cast family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_cast_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
