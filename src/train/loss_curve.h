// loss_curve.svg: the training curve of a run, drawn from its metrics.jsonl (so a resumed run's
// curve covers the whole run): axes with "nice" ticks (1/2/5 x 10^k), the train loss as a line,
// eval losses as dots, a legend. Plain SVG 1.1, no scripts or external fonts.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace st {

struct CurvePoint {
  double step = 0, value = 0;
};

struct LossCurve {
  std::vector<CurvePoint> train;  // "loss" lines
  std::vector<CurvePoint> eval;   // "eval_loss" lines
};

// Parses metrics.jsonl; lines that are not JSON objects or hold non-finite values are skipped.
StatusOr<LossCurve> read_loss_curve(const std::string& metrics_path);
// The SVG document. An empty curve still gives a valid (empty) chart.
std::string loss_curve_svg(const LossCurve& c, const std::string& title);
// read + draw + write atomically. InvalidArgument when metrics.jsonl holds no loss.
Status write_loss_curve_svg(const std::string& metrics_path, const std::string& svg_path,
                            const std::string& title);

// Round tick values covering [lo, hi]: about `target` of them, spaced 1, 2 or 5 x 10^k.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace st
