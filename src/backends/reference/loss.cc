// Reference kernels of the loss family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_loss_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
