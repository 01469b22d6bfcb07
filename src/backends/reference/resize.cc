// Reference kernels of the resize family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_resize_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
