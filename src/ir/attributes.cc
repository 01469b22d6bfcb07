#include "ir/attributes.h"

namespace peregrine::ir {

using Type = Attribute::Type;

Status AttrView::wrong_type(const std::string& name, const char* expected) const {
  return invalid_model(node_.describe() + ": attribute '" + name + "' must be " + expected);
}

Expected<int64_t> AttrView::get_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type != Type::kInt) return wrong_type(name, "an int");
  return a->i;
}

Expected<int64_t> AttrView::get_int(const std::string& name) const {
  if (!has(name)) return invalid_model(node_.describe() + ": required attribute '" + name + "' is missing");
  return get_int(name, 0);
}

Expected<float> AttrView::get_float(const std::string& name, float fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type == Type::kInt) return static_cast<float>(a->i);
  if (a->type != Type::kFloat) return wrong_type(name, "a float");
  return a->f;
}

Expected<float> AttrView::get_float(const std::string& name) const {
  if (!has(name)) return invalid_model(node_.describe() + ": required attribute '" + name + "' is missing");
  return get_float(name, 0.f);
}

Expected<std::string> AttrView::get_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type != Type::kString) return wrong_type(name, "a string");
  return a->s;
}

Expected<std::string> AttrView::get_string(const std::string& name) const {
  if (!has(name)) return invalid_model(node_.describe() + ": required attribute '" + name + "' is missing");
  return get_string(name, "");
}

Expected<std::vector<int64_t>> AttrView::get_ints(const std::string& name,
                                                  std::vector<int64_t> fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type == Type::kInt) return std::vector<int64_t>{a->i};
  if (a->type != Type::kInts) return wrong_type(name, "a list of ints");
  return a->ints;
}

Expected<std::vector<float>> AttrView::get_floats(const std::string& name,
                                                  std::vector<float> fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type == Type::kFloat) return std::vector<float>{a->f};
  if (a->type != Type::kFloats) return wrong_type(name, "a list of floats");
  return a->floats;
}

Expected<std::vector<std::string>> AttrView::get_strings(const std::string& name,
                                                         std::vector<std::string> fallback) const {
  const Attribute* a = node_.attribute(name);
  if (!a) return fallback;
  if (a->type == Type::kString) return std::vector<std::string>{a->s};
  if (a->type != Type::kStrings) return wrong_type(name, "a list of strings");
  return a->strings;
}

const Tensor* AttrView::get_tensor(const std::string& name) const {
  const Attribute* a = node_.attribute(name);
  return a && a->type == Type::kTensor ? &a->t : nullptr;
}

const Graph* AttrView::get_graph(const std::string& name) const {
  const Attribute* a = node_.attribute(name);
  return a && a->type == Type::kGraph ? a->g.get() : nullptr;
}

}  // namespace peregrine::ir
