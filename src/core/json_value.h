// JSON as a value tree: a reader (objects, arrays, strings, numbers, literals) and a writer, for
// the files and messages Peregrine reads (the machine-ceilings cache, Triton model configs).
#pragma once

#include <string>
#include <vector>

#include "peregrine/status.h"

namespace peregrine {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  // An object's members in document order: keys[i] names values[i] (clang refuses a vector of
  // pairs holding Json inside Json's own definition, where Json is still incomplete).
  std::vector<std::string> keys;
  std::vector<Json> values;

  static Json make_string(std::string s);
  static Json make_number(double v);
  static Json make_object();
  static Json make_array();

  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
  // The member named `key` of an object; null when absent or when this is not an object.
  const Json* get(const std::string& key) const;
  Json* get(const std::string& key);
  // Sets (or adds, at the end) an object's member; the object keeps its other members' order.
  Json& set(const std::string& key, Json value);
};

// Parses one JSON document (nesting up to 64 levels); errors name the offset.
Expected<Json> parse_json(const std::string& text);
// Compact JSON text of `value` (numbers as json_number writes them).
std::string to_json_text(const Json& value);

}  // namespace peregrine
