// Reference kernels of the reduce family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_reduce_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
