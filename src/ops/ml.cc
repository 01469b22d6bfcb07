// Schemas of the ml family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_ml_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
