#include "train/dpo_variants.h"

#include <algorithm>
#include <cmath>

#include "train/preference_loss.h"

namespace st {
namespace {

// A value with its derivatives in the two log-ratios (forward mode).
struct Dual {
  double v = 0, a = 0, b = 0;  // value, d/dcl, d/drl
};
Dual operator+(Dual x, Dual y) { return {x.v + y.v, x.a + y.a, x.b + y.b}; }
Dual operator-(Dual x, Dual y) { return {x.v - y.v, x.a - y.a, x.b - y.b}; }
Dual operator*(double k, Dual x) { return {k * x.v, k * x.a, k * x.b}; }
Dual operator*(Dual x, Dual y) { return {x.v * y.v, x.a * y.v + x.v * y.a, x.b * y.v + x.v * y.b}; }
Dual operator+(double k, Dual x) { return {k + x.v, x.a, x.b}; }
Dual operator-(Dual x) { return -1.0 * x; }
// f(x) with f'(x) = df: the chain rule.
Dual chain(Dual x, double f, double df) { return {f, df * x.a, df * x.b}; }
double sig(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }
double logsig(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }
Dual sigmoid(Dual x) { return chain(x, sig(x.v), sig(x.v) * sig(-x.v)); }
Dual log_sigmoid(Dual x) { return chain(x, logsig(x.v), sig(-x.v)); }
Dual exp(Dual x) { return chain(x, std::exp(x.v), std::exp(x.v)); }
Dual relu(Dual x) { return x.v > 0 ? x : Dual{}; }
Dual square(Dual x) { return x * x; }

}  // namespace

bool dpo_variant(PreferenceLoss l, const PreferenceConfig& c, double cl_v, double rl_v, double nc, double nr,
                 double* loss, double* dcl, double* drl) {
  const Dual cl{cl_v, 1, 0}, rl{rl_v, 0, 1};
  const double beta = c.beta, e = c.label_smoothing;
  const Dual z = beta * (cl - rl);
  Dual f;
  switch (l) {
    case PreferenceLoss::kHinge: f = relu(1.0 + -z); break;
    case PreferenceLoss::kRobust:
      f = (1.0 / (1.0 - 2.0 * e)) * (-(1.0 - e) * log_sigmoid(z) + e * log_sigmoid(-z));
      break;
    case PreferenceLoss::kExoPair: {
      const double eps = e == 0 ? 1e-3 : e;  // TRL's default when no smoothing is set
      f = sigmoid(z) * (-std::log1p(-eps) + log_sigmoid(z)) + sigmoid(-z) * (-std::log(eps) + log_sigmoid(-z));
      break;
    }
    case PreferenceLoss::kNcaPair:
      f = -log_sigmoid(beta * cl) - 0.5 * log_sigmoid(-beta * cl) - 0.5 * log_sigmoid(-beta * rl);
      break;
    case PreferenceLoss::kSppoHard: f = square(-0.5 / beta + cl) + square(0.5 / beta + rl); break;
    case PreferenceLoss::kApoZero: f = 1.0 + -sigmoid(beta * cl) + sigmoid(beta * rl); break;
    case PreferenceLoss::kApoDown: f = sigmoid(beta * cl) + (1.0 + -sigmoid(z)); break;
    case PreferenceLoss::kDiscopop: {
      // e^-z s(z / tau) as one exponential, e^(-z + log s(z / tau)): no inf x 0 far out.
      const Dual mod = sigmoid((1.0 / c.discopop_tau) * z);
      f = -log_sigmoid(z) * (1.0 + -mod) + exp(-z + log_sigmoid((1.0 / c.discopop_tau) * z));
      break;
    }
    case PreferenceLoss::kSigmoidNorm: f = -log_sigmoid(beta * ((1.0 / nc) * cl - (1.0 / nr) * rl)); break;
    default: return false;
  }
  *loss = f.v;
  *dcl = f.a;
  *drl = f.b;
  return true;
}

}  // namespace st
