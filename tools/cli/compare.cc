// peregrine compare
#include <cstdio>

#include "cli_common.h"

namespace peregrine::cli {

int cmd_compare(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return print_error(unsupported("peregrine compare is not implemented yet"));
}

}  // namespace peregrine::cli
