// What flows along a graph edge at run time: a tensor, a sequence of tensors,
// or an optional that may hold nothing (ONNX's Sequence and Optional types).
#pragma once

#include <vector>

#include "peregrine/tensor.h"

namespace peregrine {

struct RuntimeValue {
  enum class Kind { kTensor, kSequence, kNone };
  Kind kind = Kind::kNone;
  Tensor tensor;                             // kind == kTensor
  std::vector<Tensor> sequence;              // kind == kSequence
  DType sequence_dtype = DType::kUndefined;  // element type of an empty sequence
  bool is_optional = false;                  // declared as optional(...) in the graph

  static RuntimeValue of(Tensor t) {
    RuntimeValue v;
    v.kind = Kind::kTensor;
    v.tensor = std::move(t);
    return v;
  }
  static RuntimeValue of_sequence(std::vector<Tensor> s, DType elem = DType::kUndefined) {
    RuntimeValue v;
    v.kind = Kind::kSequence;
    if (elem == DType::kUndefined && !s.empty()) elem = s.front().dtype();
    v.sequence = std::move(s);
    v.sequence_dtype = elem;
    return v;
  }
  static RuntimeValue none() { return RuntimeValue{}; }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_none() const { return kind == Kind::kNone; }
};

}  // namespace peregrine
