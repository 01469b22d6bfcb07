// Reference kernels of the gather_scatter family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_gather_scatter_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
