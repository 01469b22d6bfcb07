// Model inputs for the CLI commands that run a model (run, bench, profile): the
// --input NAME=FILE.npy / --shape NAME=DIMS flags and seeded random values for the
// inputs the user did not give.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "cli_common.h"
#include "peregrine/session.h"
#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine::cli {

// Declares --input (repeatable), --shape (repeatable), --shape-profile (repeatable) and --seed
// on `args`.
void add_model_input_flags(Args* args);

// "NAME=MIN:OPT:MAX" (each DIMS as for --shape).
Expected<std::pair<std::string, ShapeProfile>> parse_shape_profile(const std::string& text);

// --shape into options->input_shapes; --shape-profile into options->shape_profiles (and OPT into
// input_shapes where --shape does not name the input); --input files read into *given (file I/O
// happens here, before any timing starts); --seed (default 0) into *seed.
Status parse_model_input_flags(const Args& args, SessionOptions* options,
                               std::map<std::string, Tensor>* given, uint64_t* seed);

// Seeded random values: floats uniform in [-1, 1), integers in [0, 10), bools fair.
Expected<Tensor> random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng);

// One tensor per graph input: the given ones (each must name an input of the model),
// random values for the rest (unknown dims become 1, with a note on stderr).
Expected<std::map<std::string, Tensor>> make_model_inputs(const Session& session,
                                                          const std::map<std::string, Tensor>& given,
                                                          uint64_t seed);

// "data=1x3x224x224;mask=1x128" for the inputs as they will be run.
std::string describe_input_shapes(const std::map<std::string, Tensor>& inputs);

}  // namespace peregrine::cli
