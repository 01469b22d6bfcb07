// peregrine runs
#include <cstdio>

#include "cli_common.h"

namespace peregrine::cli {

int cmd_runs(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return print_error(unsupported("peregrine runs is not implemented yet"));
}

}  // namespace peregrine::cli
