// Schemas of the signal family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_signal_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
