// How much memory a session may plan for. Checked before anything large is allocated: a model
// whose static tensors (activation arena, graph inputs and outputs, weights) need more than the
// budget is refused with the numbers, instead of running into the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace peregrine {

// This machine's physical memory in bytes (0 if unknown).
int64_t physical_memory_bytes();
// The default budget: three quarters of physical memory (the rest for the OS, the process's
// code, and what the kernels allocate per run), or no limit where physical memory is unknown.
int64_t default_memory_budget();
// "12.0 GiB", "512 MiB", "64 KiB", "100 B".
std::string format_bytes(int64_t bytes);

}  // namespace peregrine
