#include "train/loss_curve.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

constexpr double kW = 800, kH = 480;
constexpr double kLeft = 80, kRight = 24, kTop = 48, kBottom = 56;

struct Range {
  double lo, hi;
  double span() const { return hi - lo; }
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_label(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// Ranges of the data, widened when degenerate (one point, flat loss) and padded to the ticks.
void data_ranges(const LossCurve& c, Range* x, Range* y) {
  *x = {INFINITY, -INFINITY};
  *y = {INFINITY, -INFINITY};
  for (const auto* v : {&c.train, &c.eval})
    for (const CurvePoint& p : *v) {
      x->lo = std::min(x->lo, p.step), x->hi = std::max(x->hi, p.step);
      y->lo = std::min(y->lo, p.value), y->hi = std::max(y->hi, p.value);
    }
  if (!(x->lo <= x->hi)) *x = {0, 1};
  if (!(y->lo <= y->hi)) *y = {0, 1};
  x->lo = std::min(x->lo, 0.0);
  if (x->span() <= 0) x->hi = x->lo + 1;
  if (y->span() <= 0) *y = {y->lo - 0.5 * std::max(1e-3, std::fabs(y->lo)), y->hi + 0.5 * std::max(1e-3, std::fabs(y->hi))};
  const double pad = 0.05 * y->span();
  *y = {y->lo - pad, y->hi + pad};
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || target < 1) return out;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    step = f * mag;
    if (step >= raw) break;
  }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

StatusOr<LossCurve> read_loss_curve(const std::string& metrics_path) {
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(metrics_path));
  LossCurve c;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    StatusOr<Json> j = parse_json(std::string_view(text).substr(pos, nl - pos), metrics_path);
    pos = nl + 1;
    if (!j.ok() || !j->is_object() || !j->contains("step") || !(*j)["step"].is_number()) continue;
    const double step = (*j)["step"].get<double>();
    for (auto [key, dst] : {std::pair{"loss", &c.train}, std::pair{"eval_loss", &c.eval}}) {
      if (!j->contains(key) || !(*j)[key].is_number()) continue;
      const double v = (*j)[key].get<double>();
      if (std::isfinite(v)) dst->push_back({step, v});
    }
  }
  return c;
}

std::string loss_curve_svg(const LossCurve& c, const std::string& title) {
  Range xr, yr;
  data_ranges(c, &xr, &yr);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double s) { return kLeft + (s - xr.lo) / xr.span() * pw; };
  auto py = [&](double v) { return kTop + (1 - (v - yr.lo) / yr.span()) * ph; };
  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kW) + "\" height=\"" + num(kH) +
       "\" viewBox=\"0 0 " + num(kW) + " " + num(kH) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(kW / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" + xml_escape(title) +
       "</text>\n";
  const std::vector<double> xt = nice_ticks(xr.lo, xr.hi, 8), yt = nice_ticks(yr.lo, yr.hi, 6);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  s += "<g class=\"grid\" stroke=\"#e0e0e0\">\n";
  for (double v : xt) s += "<line x1=\"" + num(px(v)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(v)) + "\" y2=\"" + num(kTop + ph) + "\"/>\n";
  for (double v : yt) s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" + num(py(v)) + "\"/>\n";
  s += "</g>\n<g class=\"ticks\">\n";
  for (double v : xt)
    s += "<text class=\"xtick\" x=\"" + num(px(v)) + "\" y=\"" + num(kTop + ph + 18) + "\" text-anchor=\"middle\">" +
         tick_label(v, xstep) + "</text>\n";
  for (double v : yt)
    s += "<text class=\"ytick\" x=\"" + num(kLeft - 8) + "\" y=\"" + num(py(v) + 4) + "\" text-anchor=\"end\">" +
         tick_label(v, ystep) + "</text>\n";
  s += "</g>\n";
  s += "<rect class=\"axes\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kH - 12) + "\" text-anchor=\"middle\">step</text>\n";
  s += "<text transform=\"translate(20 " + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n";
  if (!c.train.empty()) {
    s += "<polyline class=\"train\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
    for (const CurvePoint& p : c.train) s += num(px(p.step)) + "," + num(py(p.value)) + " ";
    s += "\"/>\n";
  }
  for (const CurvePoint& p : c.eval)
    s += "<circle class=\"eval\" cx=\"" + num(px(p.step)) + "\" cy=\"" + num(py(p.value)) +
         "\" r=\"4\" fill=\"#ff7f0e\"/>\n";
  // Legend, top right inside the plot.
  const double lx = kLeft + pw - 130, ly = kTop + 16;
  s += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 24) + "\" y2=\"" + num(ly) +
       "\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/><text x=\"" + num(lx + 30) + "\" y=\"" + num(ly + 4) +
       "\">train loss</text>\n";
  if (!c.eval.empty())
    s += "<circle cx=\"" + num(lx + 12) + "\" cy=\"" + num(ly + 20) + "\" r=\"4\" fill=\"#ff7f0e\"/><text x=\"" +
         num(lx + 30) + "\" y=\"" + num(ly + 24) + "\">eval loss</text>\n";
  s += "</svg>\n";
  return s;
}

Status write_loss_curve_svg(const std::string& metrics_path, const std::string& svg_path, const std::string& title) {
  ASSIGN_OR_RETURN(LossCurve c, read_loss_curve(metrics_path));
  if (c.train.empty() && c.eval.empty()) return InvalidArgument(metrics_path + " holds no loss to plot");
  return write_file_atomic(svg_path, loss_curve_svg(c, title));
}

}  // namespace st
