// Schemas of the generator family.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

void register_generator_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace peregrine
