// Schemas of the softmax family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_softmax_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
