// Reference kernels of the ml family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_ml_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
