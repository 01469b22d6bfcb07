// Recording bench and profile runs in the experiment store (src/lab/store.h),
// shared by the subcommands that measure.
#pragma once

#include <string>

#include "cli_common.h"
#include "lab/run_record.h"

namespace peregrine::cli {

// Adds --db PATH and --no-record to a measuring subcommand.
void add_record_flags(Args& args);

// The store path: --db, else ~/.peregrine/runs.db.
Expected<std::string> store_path_from(const Args& args);

// Unless --no-record: fills what the caller left empty (timestamp, engine commit,
// build flags, absolute model path and its SHA-256, machine fingerprint, and the
// cached machine ceilings when `peregrine machine` measured them), stores
// the run, and prints "recorded run N in PATH" to stderr (stdout may carry --json).
// Returns 0, or the exit code after printing the error.
int record_run(const Args& args, RunRecord& record);

}  // namespace peregrine::cli
