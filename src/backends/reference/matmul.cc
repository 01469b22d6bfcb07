// Reference kernels of the matmul family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_matmul_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
