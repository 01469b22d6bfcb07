#include "lab/run_record_json.h"

namespace peregrine {
namespace {

// Text the measuring command stored as JSON is embedded as is (it parses, or it is quoted).
Json embedded(const std::string& text) {
  if (text.empty()) return Json();
  auto parsed = parse_json(text);
  if (parsed.is_ok() && (parsed->is_object() || parsed->is_array())) return *parsed;
  return Json::make_string(text);
}

std::string unembedded(const Json* v) {
  if (!v || v->type == Json::Type::kNull) return "";
  if (v->type == Json::Type::kString) return v->string;
  return to_json_text(*v);
}

Json numbers(const std::vector<double>& values) {
  Json a = Json::make_array();
  for (double v : values) a.array.push_back(Json::make_number(v));
  return a;
}

Json record_json(const RunRecord& r, RunRecordDetail detail) {
  Json o = Json::make_object();
  o.set("id", Json::make_number(static_cast<double>(r.id)));
  o.set("kind", Json::make_string(r.kind));
  o.set("timestamp", Json::make_string(r.timestamp));
  o.set("model_path", Json::make_string(r.model_path));
  o.set("model_sha256", Json::make_string(r.model_sha256));
  o.set("input_shapes", Json::make_string(r.input_shapes));
  o.set("options", embedded(r.options_json));
  o.set("engine_commit", Json::make_string(r.engine_commit));
  o.set("build_flags", Json::make_string(r.build_flags));
  o.set("machine_fingerprint", Json::make_string(r.machine_fingerprint));
  if (detail == RunRecordDetail::kComplete) o.set("machine", embedded(r.machine_json));
  Json metrics = Json::make_object();
  for (const auto& [name, value] : r.metrics) metrics.set(name, Json::make_number(value));
  o.set("metrics", std::move(metrics));
  if (detail == RunRecordDetail::kSummary) return o;
  o.set("latencies_ms", numbers(r.latencies_ms));
  Json nodes = Json::make_array();
  for (const NodeMetrics& n : r.nodes) {
    Json node = Json::make_object();
    node.set("node", Json::make_string(n.node));
    node.set("op_type", Json::make_string(n.op_type));
    node.set("time_ms", Json::make_number(n.time_ms));
    node.set("flops", Json::make_number(n.flops));
    node.set("bytes", Json::make_number(n.bytes));
    node.set("time_iqr_ms", Json::make_number(n.time_iqr_ms));
    nodes.array.push_back(std::move(node));
  }
  o.set("nodes", std::move(nodes));
  return o;
}

Status read_string(const Json& o, const char* key, bool required, std::string* out) {
  const Json* v = o.get(key);
  if (!v || v->type == Json::Type::kNull) {
    if (required) return invalid_input(std::string("missing '") + key + "'");
    return Status::ok();
  }
  if (v->type != Json::Type::kString)
    return invalid_input(std::string("'") + key + "' is not a string");
  *out = v->string;
  return Status::ok();
}

Status read_number(const Json& o, const char* key, double* out) {
  const Json* v = o.get(key);
  if (!v) return Status::ok();
  if (v->type != Json::Type::kNumber)
    return invalid_input(std::string("'") + key + "' is not a number");
  *out = v->number;
  return Status::ok();
}

Expected<RunRecord> record_from(const Json& o) {
  if (!o.is_object()) return invalid_input("not a JSON object");
  RunRecord r;
  PG_RETURN_IF_ERROR(read_string(o, "kind", true, &r.kind));
  if (r.kind != "bench" && r.kind != "profile")
    return invalid_input("kind '" + r.kind + "' is neither bench nor profile");
  PG_RETURN_IF_ERROR(read_string(o, "timestamp", true, &r.timestamp));
  PG_RETURN_IF_ERROR(read_string(o, "model_path", true, &r.model_path));
  PG_RETURN_IF_ERROR(read_string(o, "model_sha256", false, &r.model_sha256));
  PG_RETURN_IF_ERROR(read_string(o, "input_shapes", false, &r.input_shapes));
  PG_RETURN_IF_ERROR(read_string(o, "engine_commit", false, &r.engine_commit));
  PG_RETURN_IF_ERROR(read_string(o, "build_flags", false, &r.build_flags));
  PG_RETURN_IF_ERROR(read_string(o, "machine_fingerprint", true, &r.machine_fingerprint));
  r.options_json = unembedded(o.get("options"));
  r.machine_json = unembedded(o.get("machine"));
  if (const Json* m = o.get("metrics")) {
    if (!m->is_object()) return invalid_input("'metrics' is not an object");
    for (size_t i = 0; i < m->keys.size(); ++i) {
      if (m->values[i].type != Json::Type::kNumber)
        return invalid_input("metric '" + m->keys[i] + "' is not a number");
      r.metrics[m->keys[i]] = m->values[i].number;
    }
  }
  if (const Json* l = o.get("latencies_ms")) {
    if (!l->is_array()) return invalid_input("'latencies_ms' is not an array");
    for (const Json& v : l->array) {
      if (v.type != Json::Type::kNumber) return invalid_input("'latencies_ms' holds a non-number");
      r.latencies_ms.push_back(v.number);
    }
  }
  if (const Json* nodes = o.get("nodes")) {
    if (!nodes->is_array()) return invalid_input("'nodes' is not an array");
    for (const Json& n : nodes->array) {
      if (!n.is_object()) return invalid_input("a node is not an object");
      NodeMetrics m;
      PG_RETURN_IF_ERROR(read_string(n, "node", true, &m.node));
      PG_RETURN_IF_ERROR(read_string(n, "op_type", true, &m.op_type));
      PG_RETURN_IF_ERROR(read_number(n, "time_ms", &m.time_ms));
      PG_RETURN_IF_ERROR(read_number(n, "flops", &m.flops));
      PG_RETURN_IF_ERROR(read_number(n, "bytes", &m.bytes));
      PG_RETURN_IF_ERROR(read_number(n, "time_iqr_ms", &m.time_iqr_ms));
      r.nodes.push_back(std::move(m));
    }
  }
  return r;
}

}  // namespace

std::string run_records_to_json(const std::vector<RunRecord>& records, RunRecordDetail detail) {
  std::string out = "[";
  for (size_t i = 0; i < records.size(); ++i) {
    out += i ? ",\n " : "\n ";
    out += to_json_text(record_json(records[i], detail));
  }
  return out + (records.empty() ? "]\n" : "\n]\n");
}

Expected<std::vector<RunRecord>> run_records_from_json(const std::string& text) {
  PG_ASSIGN_OR_RETURN(Json root, parse_json(text));
  if (!root.is_array()) return invalid_input("run records: not a JSON array");
  std::vector<RunRecord> records;
  for (size_t i = 0; i < root.array.size(); ++i) {
    auto r = record_from(root.array[i]);
    if (!r.is_ok()) return r.status().with_context("run record " + std::to_string(i));
    records.push_back(std::move(*r));
  }
  return records;
}

}  // namespace peregrine
