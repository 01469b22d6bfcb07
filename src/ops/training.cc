// Schemas of the training family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_training_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
