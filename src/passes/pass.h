// A graph pass: one named rewrite of the IR. Each pass lives in its own file whose
// header comment states what it matches, what it produces and its preconditions.
// Matching is kept apart from rewriting: a pass finds a match (no mutation), then
// rewrites it. Passes must leave graphs that do not match untouched.
#pragma once

#include <string>

#include "ir/graph.h"
#include "peregrine/status.h"

namespace peregrine::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  // The CLI name (`--disable-pass NAME`), snake_case.
  virtual const char* name() const = 0;
  // Rewrites `graph` itself, not its subgraphs (the manager walks those); returns
  // whether anything changed. Node order may be left unsorted: the manager re-sorts.
  virtual Expected<bool> run(ir::Graph& graph) = 0;
  // May the manager run this pass on If/Loop/Scan bodies too?
  virtual bool runs_on_subgraphs() const { return true; }

  // Rewrites done since the last reset (for --verbose).
  int rewrites() const { return rewrites_; }
  void reset_rewrites() { rewrites_ = 0; }

 protected:
  void count_rewrite(int n = 1) { rewrites_ += n; }

 private:
  int rewrites_ = 0;
};

}  // namespace peregrine::passes
