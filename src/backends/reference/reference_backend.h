// The reference backend: plain, obviously correct kernels for every op; the
// oracle that every faster kernel is tested against.
#pragma once

#include <map>
#include <string>

#include "backends/backend.h"

namespace peregrine {

class KernelRegistry {
 public:
  void add(const std::string& domain, const std::string& op_type, KernelFn fn);
  const KernelFn* find(const std::string& domain, const std::string& op_type) const;
  const std::map<std::pair<std::string, std::string>, KernelFn>& all() const { return kernels_; }

 private:
  std::map<std::pair<std::string, std::string>, KernelFn> kernels_;
};

class ReferenceBackend : public Backend {
 public:
  ReferenceBackend();
  std::string name() const override { return "reference"; }
  bool supports(const ir::Node& node) const override;
  Expected<std::unique_ptr<PreparedKernel>> prepare(
      const ir::Node& node, const std::vector<ir::ValueType>& input_types) const override;
  const KernelRegistry& kernels() const { return kernels_; }

 private:
  KernelRegistry kernels_;
};

const ReferenceBackend& reference_backend();

}  // namespace peregrine
