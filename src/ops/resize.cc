// Schemas of the resize family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_resize_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
