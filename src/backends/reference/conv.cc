// Reference kernels of the conv family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_conv_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
