#include "profiler/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>

#include "core/json_text.h"
#include "profiler/trace.h"

namespace peregrine::profiler {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Three significant digits, no exponent for ordinary magnitudes: 0.0123, 4.56, 1234.
std::string sig3(double v) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : "-";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1000) return fmt("%.0f", v);
  if (a >= 100) return fmt("%.1f", v);
  if (a >= 1) return fmt("%.2f", v);
  if (a >= 0.001) return fmt("%.4f", v);
  return fmt("%.2e", v);
}

const char* class_token(BoundClass c) {
  switch (c) {
    case BoundClass::kCompute:
      return "compute";
    case BoundClass::kMemory:
      return "memory";
    case BoundClass::kOverhead:
      return "overhead";
  }
  return "overhead";
}

// Decade k as a label: 0.001, 0.01, ..., 1, 10, ..., 1e+06.
std::string decade_label(int k) {
  if (k >= -4 && k <= 5) return fmt("%g", std::pow(10.0, k));
  return "1e" + std::to_string(k);
}

// Maps log10 of a value into pixels along one axis.
struct LogAxis {
  int lo_decade, hi_decade;  // the axis spans [10^lo, 10^hi]
  double px_lo, px_hi;       // pixel of 10^lo and of 10^hi
  double at(double value) const {
    const double lv = std::clamp(std::log10(value), double(lo_decade), double(hi_decade));
    return px_lo + (lv - lo_decade) / (hi_decade - lo_decade) * (px_hi - px_lo);
  }
  double min_value() const { return std::pow(10.0, lo_decade); }
  double max_value() const { return std::pow(10.0, hi_decade); }
};

// Decades covering [lo, hi] (positive), widened to at least `min_span` and at most `max_span`.
std::pair<int, int> decade_range(double lo, double hi, int min_span, int max_span) {
  int a = static_cast<int>(std::floor(std::log10(lo)));
  int b = static_cast<int>(std::ceil(std::log10(hi)));
  if (b - a < min_span) b = a + min_span;
  if (b - a > max_span) a = b - max_span;
  return {a, b};
}

constexpr double kPlotWidth = 760, kPlotHeight = 460;
constexpr double kLeft = 78, kRight = 24, kTop = 24, kBottom = 56;

void render_roofline(const ProfileReport& r, std::ostringstream& o) {
  const Roofs& roofs = r.roofs;
  const double ridge = ridge_intensity(roofs);
  // Axis extents from the roofs and every plottable node.
  double x_lo = ridge > 0 ? ridge / 100 : 0.01, x_hi = ridge > 0 ? ridge * 100 : 100;
  double y_hi = std::max(roofs.peak_gflops * 2, 1e-3);
  double y_lo = y_hi / 1e4;
  double max_time = 0;
  for (const NodeProfile& n : r.nodes) {
    const RooflinePoint& p = n.roof;
    max_time = std::max(max_time, n.median_us);
    if (p.intensity > 0 && std::isfinite(p.intensity)) {
      x_lo = std::min(x_lo, p.intensity);
      x_hi = std::max(x_hi, p.intensity);
    }
    if (p.achieved_gflops > 0) {
      y_lo = std::min(y_lo, p.achieved_gflops);
      y_hi = std::max(y_hi, p.achieved_gflops);
    }
  }
  const auto [xa, xb] = decade_range(x_lo, x_hi, 3, 12);
  const auto [ya, yb] = decade_range(y_lo, y_hi, 3, 12);
  const LogAxis x{xa, xb, kLeft, kPlotWidth - kRight};
  const LogAxis y{ya, yb, kPlotHeight - kBottom, kTop};

  o << "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << kPlotWidth
    << " " << kPlotHeight << "\" width=\"" << kPlotWidth << "\" height=\"" << kPlotHeight
    << "\" role=\"img\" aria-label=\"roofline\">\n";
  // Grid and decade labels.
  for (int k = xa; k <= xb; ++k) {
    const double px = x.at(std::pow(10.0, k));
    o << "<line class=\"grid\" x1=\"" << px << "\" y1=\"" << kTop << "\" x2=\"" << px << "\" y2=\""
      << kPlotHeight - kBottom << "\"/><text class=\"tick\" x=\"" << px << "\" y=\""
      << kPlotHeight - kBottom + 16 << "\" text-anchor=\"middle\">" << decade_label(k)
      << "</text>\n";
  }
  for (int k = ya; k <= yb; ++k) {
    const double py = y.at(std::pow(10.0, k));
    o << "<line class=\"grid\" x1=\"" << kLeft << "\" y1=\"" << py << "\" x2=\""
      << kPlotWidth - kRight << "\" y2=\"" << py << "\"/><text class=\"tick\" x=\"" << kLeft - 6
      << "\" y=\"" << py + 4 << "\" text-anchor=\"end\">" << decade_label(k) << "</text>\n";
  }
  o << "<text class=\"axis-label\" x=\"" << (kLeft + kPlotWidth - kRight) / 2 << "\" y=\""
    << kPlotHeight - 14 << "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n";
  o << "<text class=\"axis-label\" transform=\"translate(18," << (kTop + kPlotHeight - kBottom) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">performance (GFLOP/s)</text>\n";

  // The roofs: bandwidth slope up to the ridge, then the flat compute peak.
  if (roofs.peak_gflops > 0 && roofs.bandwidth_gbps > 0) {
    const double x0 = x.min_value(), x1 = x.max_value();
    const double slope_start_i = std::max(x0, y.min_value() / roofs.bandwidth_gbps);
    o << "<polyline id=\"roof\" class=\"roof\" points=\"" << x.at(slope_start_i) << ","
      << y.at(attainable_gflops(slope_start_i, roofs)) << " " << x.at(ridge) << ","
      << y.at(roofs.peak_gflops) << " " << x.at(x1) << "," << y.at(roofs.peak_gflops) << "\"/>\n";
    o << "<line class=\"ridge\" x1=\"" << x.at(ridge) << "\" y1=\"" << y.at(roofs.peak_gflops)
      << "\" x2=\"" << x.at(ridge) << "\" y2=\"" << kPlotHeight - kBottom << "\"/>\n";
    o << "<text class=\"roof-label\" x=\"" << x.at(x1) - 4 << "\" y=\""
      << y.at(roofs.peak_gflops) - 6 << "\" text-anchor=\"end\">peak " << sig3(roofs.peak_gflops)
      << " GFLOP/s</text>\n";
    o << "<text class=\"roof-label\" x=\"" << x.at(ridge) + 4 << "\" y=\""
      << kPlotHeight - kBottom - 6 << "\">ridge " << sig3(ridge) << " FLOP/B</text>\n";
    const double mid_i = std::sqrt(slope_start_i * ridge);
    // Along the slope, just above it: one decade right is one decade up on both axes.
    const double decade_dx = (x.px_hi - x.px_lo) / (xb - xa);
    const double decade_dy = (y.px_lo - y.px_hi) / (yb - ya);
    const double angle = -std::atan2(decade_dy, decade_dx) * 180 / M_PI;
    const double lx = x.at(mid_i), ly = y.at(attainable_gflops(mid_i, roofs));
    o << "<text class=\"roof-label\" text-anchor=\"middle\" x=\"" << lx << "\" y=\"" << ly - 6
      << "\" transform=\"rotate(" << fmt("%.2f", angle) << " " << lx << " " << ly << ")\">"
      << sig3(roofs.bandwidth_gbps) << " GB/s</text>\n";
  }

  // Dots, biggest first so small ones stay visible and clickable on top. Area ~ time.
  std::vector<size_t> order(r.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r.nodes[a].median_us > r.nodes[b].median_us; });
  o << "<g id=\"node-points\">\n";
  for (size_t i : order) {
    const NodeProfile& n = r.nodes[i];
    const RooflinePoint& p = n.roof;
    // Zero-FLOP nodes have no place on a log axis: they sit on the bottom-left edge,
    // zero-byte ones on the right edge; the class "clamped" marks them.
    const bool clamped =
        !(p.intensity > 0 && std::isfinite(p.intensity)) || !(p.achieved_gflops > 0);
    const double px = p.intensity > 0
                          ? x.at(std::isfinite(p.intensity) ? p.intensity : x.max_value())
                          : x.at(x.min_value());
    const double py = p.achieved_gflops > 0 ? y.at(p.achieved_gflops) : y.at(y.min_value());
    const double radius = 3 + 15 * (max_time > 0 ? std::sqrt(n.median_us / max_time) : 0);
    o << "<circle class=\"node-point " << class_token(p.bound_class) << (clamped ? " clamped" : "")
      << "\" data-node=\"" << html_escape(n.name) << "\" data-index=\"" << n.index << "\" cx=\""
      << fmt("%.2f", px) << "\" cy=\"" << fmt("%.2f", py) << "\" r=\"" << fmt("%.2f", radius)
      << "\"><title>" << html_escape(n.name.empty() ? "(unnamed)" : n.name) << " ("
      << html_escape(n.op_type) << ")\n"
      << sig3(n.median_us) << " us, " << sig3(p.achieved_gflops) << " GFLOP/s, "
      << sig3(p.achieved_gbps) << " GB/s\nintensity " << sig3(p.intensity) << " FLOP/B, "
      << sig3(p.percent_of_bound) << "% of roof, " << bound_class_name(p.bound_class)
      << (clamped ? "\n(drawn on the plot edge)" : "") << "</title></circle>\n";
  }
  o << "</g>\n</svg>\n";
}

void render_op_bars(const ProfileReport& r, std::ostringstream& o) {
  const double row = 22, label_w = 190, bar_w = 420;
  const double height = row * static_cast<double>(r.op_totals.size()) + 10;
  double max_time = 0;
  for (const auto& t : r.op_totals) max_time = std::max(max_time, t.time_us);
  o << "<svg id=\"op-breakdown\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
    << label_w + bar_w + 170 << "\" height=\"" << height << "\">\n";
  double yy = 5;
  for (const auto& t : r.op_totals) {
    const double w = max_time > 0 ? bar_w * t.time_us / max_time : 0;
    o << "<g class=\"op-bar\" data-op=\"" << html_escape(t.op_type) << "\"><title>"
      << html_escape(t.op_type) << ": " << t.count << " node(s), " << sig3(t.time_us / 1e3)
      << " ms, " << sig3(t.flops / 1e9) << " GFLOP, " << sig3(t.bytes / 1e6)
      << " MB</title><text x=\"" << label_w - 6 << "\" y=\"" << yy + 15 << "\" text-anchor=\"end\">"
      << html_escape(t.op_type) << " (" << t.count << ")</text><rect x=\"" << label_w << "\" y=\""
      << yy + 3 << "\" width=\"" << fmt("%.2f", std::max(w, 1.0)) << "\" height=\"" << row - 6
      << "\"/><text x=\"" << label_w + w + 6 << "\" y=\"" << yy + 15 << "\">"
      << sig3(t.time_us / 1e3) << " ms (" << fmt("%.1f", t.percent_of_nodes) << "%)</text></g>\n";
    yy += row;
  }
  o << "</svg>\n";
}

void render_table(const ProfileReport& r, std::ostringstream& o) {
  const double total = total_node_time_us(r.nodes);
  o << "<table id=\"nodes\" class=\"sortable\"><thead><tr>"
       "<th "
       "data-type=\"num\">#</th><th>node</th><th>op</th><th>kernel</th><th>inputs</th><th>outputs</"
       "th>"
       "<th data-type=\"num\">median us</th><th data-type=\"num\">% time</th>"
       "<th data-type=\"num\">MFLOP</th><th data-type=\"num\">MB</th>"
       "<th data-type=\"num\">GFLOP/s</th><th data-type=\"num\">GB/s</th>"
       "<th data-type=\"num\">FLOP/B</th><th data-type=\"num\">roof GFLOP/s</th>"
       "<th data-type=\"num\">% of roof</th><th>class</th></tr></thead>\n<tbody>\n";
  for (const NodeProfile& n : r.nodes) {
    const RooflinePoint& p = n.roof;
    auto num = [&](double v, const std::string& text) {
      o << "<td data-value=\"" << (std::isfinite(v) ? fmt("%.9g", v) : std::string("1e308"))
        << "\">" << text << "</td>";
    };
    o << "<tr class=\"" << class_token(p.bound_class) << "\" data-index=\"" << n.index << "\">";
    num(static_cast<double>(n.index), std::to_string(n.index));
    o << "<td class=\"name\">" << html_escape(n.name) << "</td><td>" << html_escape(n.op_type)
      << "</td><td>" << html_escape(n.kernel) << "</td><td class=\"shape\">"
      << html_escape(n.input_shapes) << "</td><td class=\"shape\">" << html_escape(n.output_shapes)
      << "</td>";
    num(n.median_us, sig3(n.median_us));
    num(total > 0 ? 100 * n.median_us / total : 0,
        fmt("%.1f", total > 0 ? 100 * n.median_us / total : 0));
    num(p.flops, sig3(p.flops / 1e6) + (n.cost_known ? "" : "?"));
    num(p.bytes, sig3(p.bytes / 1e6) + (n.cost_known ? "" : "?"));
    num(p.achieved_gflops, sig3(p.achieved_gflops));
    num(p.achieved_gbps, sig3(p.achieved_gbps));
    num(p.intensity, sig3(p.intensity));
    num(p.bound_gflops, sig3(p.bound_gflops));
    num(p.percent_of_bound, fmt("%.1f", p.percent_of_bound));
    o << "<td>" << bound_class_name(p.bound_class) << "</td></tr>\n";
  }
  o << "</tbody></table>\n";
}

constexpr const char* kStyle = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.meta td { padding: 1px 12px 1px 0; }
#js-errors:empty { display: none; }
#js-errors { color: #a00; border: 1px solid #a00; padding: 8px; white-space: pre-wrap; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.grid { stroke: #e4e4e4; } .tick { fill: #666; } .axis-label { font-size: 12px; }
.roof { fill: none; stroke: #222; stroke-width: 2; } .ridge { stroke: #999; stroke-dasharray: 4 3; }
.roof-label { font-size: 11px; fill: #222; }
.node-point { fill-opacity: 0.55; stroke: #333; stroke-width: 0.6; cursor: pointer; }
.node-point.compute { fill: #d9534f; } .node-point.memory { fill: #337ab7; }
.node-point.overhead { fill: #999; } .node-point.clamped { stroke-dasharray: 2 1; }
.node-point.highlight, .node-point:hover { stroke: #000; stroke-width: 2.5; fill-opacity: 0.9; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 5px;
           margin-right: 4px; }
.op-bar rect { fill: #5b8def; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 6px; text-align: right; }
th { cursor: pointer; background: #f4f4f4; position: sticky; top: 0; }
td.name, td.shape, td:nth-child(3), td:nth-child(4), td:last-child { text-align: left; }
td.name { min-width: 140px; max-width: 260px; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; }
tr.highlight td { background: #fff3c4; }
ol.bottlenecks li { margin-bottom: 4px; }
)CSS";

// Records errors into the page itself so a headless browser's DOM dump shows them.
constexpr const char* kErrorTrap = R"JS(
(function () {
  function record(text) {
    var box = document.getElementById('js-errors');
    if (box) box.appendChild(document.createTextNode(text + '\n'));
    document.body.setAttribute('data-js-errors', 'yes');
  }
  window.onerror = function (message, source, line) {
    record('error: ' + message + ' (line ' + line + ')');
  };
  window.addEventListener('unhandledrejection', function (e) {
    record('unhandled rejection: ' + e.reason);
  });
  var consoleError = console.error;
  console.error = function () {
    record('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return consoleError.apply(console, arguments);
  };
})();
)JS";

// Sortable table, and hovering a row or a dot highlights its partner.
constexpr const char* kScript = R"JS(
(function () {
  var table = document.getElementById('nodes');
  var points = {};
  document.querySelectorAll('#roofline .node-point').forEach(function (c) {
    points[c.getAttribute('data-index')] = c;
  });
  var rows = {};
  table.querySelectorAll('tbody tr').forEach(function (tr) {
    rows[tr.getAttribute('data-index')] = tr;
  });
  function highlight(index, on) {
    [points[index], rows[index]].forEach(function (el) {
      if (el) el.classList.toggle('highlight', on);
    });
  }
  Object.keys(rows).forEach(function (i) {
    rows[i].addEventListener('mouseenter', function () { highlight(i, true); });
    rows[i].addEventListener('mouseleave', function () { highlight(i, false); });
  });
  Object.keys(points).forEach(function (i) {
    points[i].addEventListener('mouseenter', function () { highlight(i, true); });
    points[i].addEventListener('mouseleave', function () { highlight(i, false); });
    points[i].addEventListener('click', function () {
      if (rows[i]) rows[i].scrollIntoView({block: 'center'});
    });
  });
  table.querySelectorAll('th').forEach(function (th, column) {
    var descending = true;
    th.addEventListener('click', function () {
      var numeric = th.getAttribute('data-type') === 'num';
      var body = table.tBodies[0];
      var list = Array.prototype.slice.call(body.rows);
      list.sort(function (a, b) {
        var x = a.cells[column], y = b.cells[column];
        var c = numeric
            ? parseFloat(x.getAttribute('data-value')) - parseFloat(y.getAttribute('data-value'))
            : x.textContent.localeCompare(y.textContent);
        return descending ? -c : c;
      });
      descending = !descending;
      list.forEach(function (tr) { body.appendChild(tr); });
    });
  });
  document.body.setAttribute('data-node-points', String(Object.keys(points).length));
  document.body.setAttribute('data-report-ready', 'ok');
})();
)JS";

}  // namespace

double total_node_time_us(const std::vector<NodeProfile>& nodes) {
  double total = 0;
  for (const NodeProfile& n : nodes) total += n.median_us;
  return total;
}

std::vector<OpTypeTotal> totals_by_op_type(const std::vector<NodeProfile>& nodes) {
  std::map<std::string, OpTypeTotal> by_op;
  for (const NodeProfile& n : nodes) {
    OpTypeTotal& t = by_op[n.op_type];
    t.op_type = n.op_type;
    ++t.count;
    t.time_us += n.median_us;
    t.flops += n.roof.flops;
    t.bytes += n.roof.bytes;
  }
  const double total = total_node_time_us(nodes);
  std::vector<OpTypeTotal> out;
  for (auto& [op, t] : by_op) {
    t.percent_of_nodes = total > 0 ? 100 * t.time_us / total : 0;
    out.push_back(t);
  }
  std::stable_sort(out.begin(), out.end(), [](const OpTypeTotal& a, const OpTypeTotal& b) {
    return a.time_us > b.time_us;
  });
  return out;
}

std::vector<size_t> top_bottlenecks(const std::vector<NodeProfile>& nodes, size_t limit) {
  std::vector<size_t> order;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].median_us > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return nodes[a].median_us > nodes[b].median_us; });
  if (order.size() > limit) order.resize(limit);
  return order;
}

std::string html_escape(const std::string& raw) {
  const std::string s = to_valid_utf8(raw);
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      case '\0':
        o += "&#xFFFD;";
        break;  // NUL is not allowed in HTML text
      default:
        o += c;
    }
  }
  return o;
}

std::string render_html_report(const ProfileReport& r) {
  std::ostringstream o;
  const double nodes_total_us = total_node_time_us(r.nodes);
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
    << "<title>Peregrine profile: " << html_escape(r.model_path) << "</title>\n<style>" << kStyle
    << "</style></head>\n<body>\n<div id=\"js-errors\"></div>\n<script>" << kErrorTrap
    << "</script>\n";
  o << "<h1>Peregrine profile: " << html_escape(r.model_path) << "</h1>\n<table class=\"meta\">"
    << "<tr><td>machine</td><td>" << html_escape(r.cpu_model) << "</td></tr>"
    << "<tr><td>roofs</td><td>peak " << sig3(r.roofs.peak_gflops) << " GFLOP/s ("
    << html_escape(r.isa) << "), bandwidth " << sig3(r.roofs.bandwidth_gbps) << " GB/s, ridge "
    << sig3(ridge_intensity(r.roofs)) << " FLOP/B, at " << r.threads << " thread(s)</td></tr>"
    << "<tr><td>runs</td><td>" << r.iterations << " profiled; median latency "
    << sig3(r.latency_median_ms) << " ms with per-node timing";
  if (r.latency_untimed_median_ms > 0)
    o << ", " << sig3(r.latency_untimed_median_ms) << " ms without";
  o << "</td></tr><tr><td>nodes</td><td>" << r.nodes.size() << " (sum of medians "
    << sig3(nodes_total_us / 1e3) << " ms";
  if (r.latency_median_ms > 0)
    o << ", " << fmt("%.1f", 100 * nodes_total_us / 1e3 / r.latency_median_ms)
      << "% of the run; the rest is executor work between kernels";
  o << ")</td></tr></table>\n";

  o << "<h2>Roofline</h2>\n<div class=\"legend\"><span><i "
       "style=\"background:#d9534f\"></i>compute-bound"
       "</span><span><i style=\"background:#337ab7\"></i>memory-bound</span><span><i "
       "style=\"background:#999\"></i>overhead-bound</span><span>dot area ~ time; dashed outline: "
       "zero FLOPs or bytes, drawn on the edge</span></div>\n";
  render_roofline(r, o);

  o << "<h2>Top bottlenecks</h2>\n<ol class=\"bottlenecks\">\n";
  for (size_t i : r.bottlenecks) {
    const NodeProfile& n = r.nodes[i];
    o << "<li><b>" << html_escape(n.name) << "</b> (" << html_escape(n.op_type) << ", "
      << sig3(n.median_us) << " us, "
      << fmt("%.1f", nodes_total_us > 0 ? 100 * n.median_us / nodes_total_us : 0)
      << "% of node time): " << html_escape(n.reason) << "</li>\n";
  }
  o << "</ol>\n<h2>Time by op type</h2>\n";
  render_op_bars(r, o);
  o << "<h2>Nodes</h2>\n<p>Click a column to sort; hover a row to find its dot.</p>\n";
  o << "<div class=\"table-wrap\">\n";
  render_table(r, o);
  o << "</div>\n";
  o << "<script>" << kScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace peregrine::profiler
