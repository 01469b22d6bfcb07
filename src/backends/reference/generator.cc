// Reference kernels of the generator family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_generator_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
