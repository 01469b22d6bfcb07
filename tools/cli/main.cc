// peregrine: the command-line front end. One file per subcommand.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli_common.h"

namespace {

const char kUsage[] =
    "usage: peregrine <command> [options]\n\n"
    "commands:\n"
    "  run MODEL       run a model on given or random inputs, write outputs as .npy\n"
    "  inspect MODEL   inputs, outputs, opsets, op histogram, parameters, FLOPs\n\n"
    "'peregrine <command> --help' describes a command's options.\n"
    "exit codes: 0 ok, 2 bad model or bad input, 1 internal error\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return peregrine::cli::cmd_run(argc - 2, argv + 2);
  if (cmd == "inspect") return peregrine::cli::cmd_inspect(argc - 2, argv + 2);
  std::fprintf(stderr, "error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
