// Schemas of the loss family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_loss_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
