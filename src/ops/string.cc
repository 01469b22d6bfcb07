// Schemas of the string family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_string_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
