// Reference kernels of the sequence family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_sequence_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
