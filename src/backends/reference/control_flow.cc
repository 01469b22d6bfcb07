// Reference kernels of the control_flow family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_control_flow_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
