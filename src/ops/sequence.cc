// Schemas of the sequence family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_sequence_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
