// Reference kernels of the pool family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_pool_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
