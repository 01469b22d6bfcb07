// peregrine sweep: bench runs across the nodes of a Ray cluster, recorded in the local store.
// The fan-out is Ray's task API, in Python: this command checks its flags and hands them to
// tools/sweep/ray_sweep.py, which runs in a venv holding Ray (made once, ~/.cache/peregrine).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_common.h"

namespace peregrine::cli {
namespace {

// This binary's own path: the nodes run the same one.
std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::string sweep_script() {
  if (const char* s = std::getenv("PEREGRINE_SWEEP_SCRIPT"); s && *s) return s;
  return std::string(PEREGRINE_SOURCE_DIR) + "/tools/sweep/ray_sweep.py";
}

}  // namespace

int cmd_sweep(int argc, char** argv) {
  Args args("sweep",
            "MODEL... [options]\n\n"
            "Runs 'peregrine bench' for every model x thread count x precision on every node of a\n"
            "Ray cluster (a local one without --address) and records the runs, with each node's\n"
            "fingerprint and ceilings, in the local experiment store; 'peregrine runs --group-by\n"
            "machine' then compares machines. The peregrine binary must exist at this path on\n"
            "every node.");
  args.flag("threads", "thread counts, comma-separated (default 1)");
  args.flag("precision", "precisions, comma-separated: fp32, bf16 (default fp32)");
  args.flag("address",
            "RAY_ADDRESS of an existing cluster (default: a local instance on 127.0.0.1)");
  args.flag("slot-cpus", "CPUs one bench reserves on its node (default: all of the node's)");
  args.flag("iterations", "timed runs per bench (see peregrine bench)");
  args.flag("duration-s", "time each bench for at least this long (see peregrine bench)");
  args.flag("warmup-ms", "warm-up per bench (see peregrine bench)");
  args.flag("db", "experiment store to import the runs into (default ~/.peregrine/runs.db)");
  Status parsed = args.parse(argc, argv);
  if (!parsed.is_ok()) return print_error(parsed);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().empty()) return print_error(invalid_input("peregrine sweep needs a MODEL"));
  std::string script = sweep_script();
  std::string self = self_path();
  if (!std::filesystem::exists(script))
    return print_error(internal_error("the sweep script " + script + " is missing"));
  if (self.empty()) return print_error(internal_error("cannot find this binary's path"));

  const char* python = std::getenv("PEREGRINE_PYTHON");
  std::vector<std::string> cmd = {python && *python ? python : "python3", script, "--peregrine",
                                  self};
  for (const std::string& m : args.positional()) cmd.push_back(m);
  for (const char* name : {"threads", "precision", "address", "slot-cpus", "iterations",
                           "duration-s", "warmup-ms", "db"}) {
    if (!args.has(name)) continue;
    cmd.push_back(std::string("--") + name);
    cmd.push_back(args.get(name));
  }
  std::vector<char*> argv_out;
  argv_out.reserve(cmd.size() + 1);
  for (std::string& s : cmd) argv_out.push_back(s.data());
  argv_out.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv_out[0], argv_out.data());
  return print_error(
      internal_error(std::string("cannot start ") + argv_out[0] + ": " + std::strerror(errno)));
}

}  // namespace peregrine::cli
