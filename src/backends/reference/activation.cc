// Reference kernels of the activation family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_activation_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
