// Reference kernels of the softmax family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_softmax_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
