// Reference kernels of the cast family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_cast_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
