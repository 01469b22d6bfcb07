// Reference kernels of the training family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_training_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
