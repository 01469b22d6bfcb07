// peregrine: the command-line front end. One file per subcommand.
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cli_common.h"
#include "core/status_error.h"

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
    "  runs            list recorded bench/profile runs; --group-by machine compares machines\n"
    "  compare A B     compare two recorded runs\n"
    "  compare-precision MODEL  a reduced precision's error against fp32, per output and per "
    "layer\n"
    "  quantize MODEL  calibrate and write an int8 QDQ model (-o OUT.onnx)\n"
    "  sweep MODEL...  bench runs across the nodes of a Ray cluster, into the local run store\n\n"
    "'peregrine <command> --help' describes a command's options.\n"
    "exit codes: 0 ok, 2 bad model or bad input, 1 internal error\n";

// The command's exit code, or -1 for an unknown command.
int run_command(const std::string& cmd, int n, char** args) {
  if (cmd == "run") return peregrine::cli::cmd_run(n, args);
  if (cmd == "inspect") return peregrine::cli::cmd_inspect(n, args);
  if (cmd == "bench") return peregrine::cli::cmd_bench(n, args);
  if (cmd == "profile") return peregrine::cli::cmd_profile(n, args);
  if (cmd == "machine") return peregrine::cli::cmd_machine(n, args);
  if (cmd == "runs") return peregrine::cli::cmd_runs(n, args);
  if (cmd == "compare") return peregrine::cli::cmd_compare(n, args);
  if (cmd == "compare-precision") return peregrine::cli::cmd_compare_precision(n, args);
  if (cmd == "compile") return peregrine::cli::cmd_compile(n, args);
  if (cmd == "quantize") return peregrine::cli::cmd_quantize(n, args);
  if (cmd == "sweep") return peregrine::cli::cmd_sweep(n, args);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  // Weights are freed as they are packed; glibc would otherwise raise its mmap threshold to
  // the size of the first large block freed and serve later weight-sized blocks from the heap,
  // whose freed middle never goes back to the system. A fixed threshold keeps every block of
  // 1 MiB or more in its own mapping, returned on free.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  // -O2 and friends become --opt-level=2 so each command's strict parser sees one form.
  std::vector<std::string> expanded = peregrine::cli::expand_short_flags(argc - 2, argv + 2);
  std::vector<char*> rest;
  for (auto& a : expanded) rest.push_back(a.data());
  rest.push_back(nullptr);
  const int n = static_cast<int>(expanded.size());
  char** args = rest.data();
  // No exception leaves a command: whatever the library let out is reported like any error.
  try {
    if (const int code = run_command(cmd, n, args); code >= 0) return code;
  } catch (...) {
    const peregrine::Status st = peregrine::status_from_current_exception(cmd);
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return st.exit_code();
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
