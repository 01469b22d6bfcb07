// Schemas of the detection family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_detection_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
