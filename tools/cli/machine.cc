// peregrine machine
#include <cstdio>

#include "cli_common.h"

namespace peregrine::cli {

int cmd_machine(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return print_error(unsupported("peregrine machine is not implemented yet"));
}

}  // namespace peregrine::cli
