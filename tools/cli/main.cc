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
    "  inspect MODEL   inputs, outputs, opsets, op histogram, parameters, FLOPs\n"
    "  compile MODEL   optimize the graph (-O0..-O3) and write it as ONNX (-o OUT.onnx)\n"
    "  bench MODEL     latency and throughput statistics (trtexec-style)\n"
    "  profile MODEL   per-node times, FLOPs, bytes and roofline; Chrome trace, HTML report\n"
    "  machine         measure this machine's peak FLOP/s and memory bandwidth\n"
    "  runs            list recorded bench/profile runs\n"
    "  compare A B     compare two recorded runs\n\n"
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
  if (cmd == "bench") return peregrine::cli::cmd_bench(argc - 2, argv + 2);
  if (cmd == "profile") return peregrine::cli::cmd_profile(argc - 2, argv + 2);
  if (cmd == "machine") return peregrine::cli::cmd_machine(argc - 2, argv + 2);
  if (cmd == "runs") return peregrine::cli::cmd_runs(argc - 2, argv + 2);
  if (cmd == "compare") return peregrine::cli::cmd_compare(argc - 2, argv + 2);
  if (cmd == "compile") return peregrine::cli::cmd_compile(argc - 2, argv + 2);
  std::fprintf(stderr, "error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
