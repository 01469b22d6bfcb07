// Schemas of the rnn family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_rnn_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
