// Reference kernels of the detection family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_detection_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
