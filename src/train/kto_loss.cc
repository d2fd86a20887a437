#include "train/kto_loss.h"

#include <algorithm>
#include <cmath>

namespace st {
namespace {
double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }
}  // namespace

KtoTerms kto_terms(const KtoExample& e, double z0, const PreferenceConfig& c) {
  KtoTerms t;
  const double r = e.policy - e.ref;
  t.reward = c.beta * r;
  // desirable: 1 - sigmoid(x), x = beta (r - z0), d/dr = -beta s (1 - s);
  // undesirable: 1 - sigmoid(y), y = beta (z0 - r), d/dr = +beta s (1 - s).
  const double x = e.desirable ? c.beta * (r - z0) : c.beta * (z0 - r);
  const double s = sigmoid(x), w = e.desirable ? c.desirable_weight : c.undesirable_weight;
  t.loss = w * sigmoid(-x);  // 1 - sigmoid(x), without the cancellation
  const double slope = c.beta * s * sigmoid(-x);
  t.dloss_dpolicy = w * (e.desirable ? -slope : slope);
  return t;
}

double kto_reference_point(const double* policy_kl, const double* ref_kl, int64_t n) {
  if (n <= 0) return 0.0;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += policy_kl[j] - ref_kl[j];
  return std::max(0.0, sum / static_cast<double>(n));
}

}  // namespace st
