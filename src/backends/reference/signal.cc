// Reference kernels of the signal family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_signal_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
