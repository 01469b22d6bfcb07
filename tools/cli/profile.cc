// peregrine profile
#include <cstdio>

#include "cli_common.h"

namespace peregrine::cli {

int cmd_profile(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return print_error(unsupported("peregrine profile is not implemented yet"));
}

}  // namespace peregrine::cli
