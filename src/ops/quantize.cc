// Schemas of the quantize family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_quantize_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
