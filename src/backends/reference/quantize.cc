// Reference kernels of the quantize family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_quantize_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
