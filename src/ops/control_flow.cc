// Schemas of the control_flow family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_control_flow_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
