// peregrine bench
#include <cstdio>

#include "cli_common.h"

namespace peregrine::cli {

int cmd_bench(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return print_error(unsupported("peregrine bench is not implemented yet"));
}

}  // namespace peregrine::cli
