// Reference kernels of the rnn family.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

void register_rnn_kernels(KernelRegistry& r) { (void)r; }

}  // namespace peregrine
