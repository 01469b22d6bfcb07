// Schemas of the matmul family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_matmul_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
