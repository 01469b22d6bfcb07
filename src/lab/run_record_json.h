// A run record as JSON and back: the complete record (options, machine ceilings, every latency,
// per-node metrics), so runs measured on other machines (peregrine sweep) can be moved into
// one experiment store with `peregrine runs --export` / `--import`.
#pragma once

#include <string>
#include <vector>

#include "core/json_value.h"
#include "lab/run_record.h"
#include "peregrine/status.h"

namespace peregrine {

// How much of a record to write: all of it (export / import), or the summary `runs --json`
// prints (no machine ceilings, latencies or per-node metrics).
enum class RunRecordDetail { kComplete, kSummary };

// One JSON object per record; options and machine ceilings, stored as JSON text, are embedded
// as objects. The id is written but never read back (the importing store assigns its own).
std::string run_records_to_json(const std::vector<RunRecord>& records,
                                RunRecordDetail detail = RunRecordDetail::kComplete);
// The records of a JSON array run_records_to_json wrote; errors name the record and the field.
Expected<std::vector<RunRecord>> run_records_from_json(const std::string& text);

}  // namespace peregrine
