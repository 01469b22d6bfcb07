// Reference kernels of the normalization family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_normalization_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
