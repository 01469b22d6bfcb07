// Reference kernels of the string family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_string_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
