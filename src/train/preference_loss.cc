#include "train/preference_loss.h"

#include <cmath>

namespace st {
namespace {

// log sigmoid(z) = -softplus(-z), written so that neither branch overflows.
double log_sigmoid(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }
double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

}  // namespace

DpoTerms dpo_terms(const DpoPair& p, const DpoConfig& c) {
  DpoTerms t;
  t.reward_chosen = c.beta * (p.policy_chosen - p.ref_chosen);
  t.reward_rejected = c.beta * (p.policy_rejected - p.ref_rejected);
  const double z = t.reward_chosen - t.reward_rejected;
  const double eps = c.label_smoothing;
  t.loss = -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
  // d/dz [-log sigmoid(z)] = -sigmoid(-z); d/dz [-log sigmoid(-z)] = sigmoid(z); dz/dpc = beta.
  t.dloss_dchosen = c.beta * (-(1 - eps) * sigmoid(-z) + eps * sigmoid(z));
  return t;
}

void DpoStats::add(const DpoPair& p, const DpoTerms& t) {
  ++n_;
  loss_ += t.loss;
  chosen_ += t.reward_chosen;
  rejected_ += t.reward_rejected;
  correct_ += t.reward_chosen > t.reward_rejected ? 1.0 : 0.0;
  logp_chosen_ += p.policy_chosen;
  logp_rejected_ += p.policy_rejected;
}

void DpoStats::merge(const DpoStats& o) {
  n_ += o.n_;
  loss_ += o.loss_;
  chosen_ += o.chosen_;
  rejected_ += o.rejected_;
  correct_ += o.correct_;
  logp_chosen_ += o.logp_chosen_;
  logp_rejected_ += o.logp_rejected_;
}

std::vector<std::pair<std::string, double>> DpoStats::metrics(const std::string& prefix) const {
  const double n = n_ ? static_cast<double>(n_) : 1.0;
  return {{prefix + "rewards/chosen", chosen_ / n},
          {prefix + "rewards/rejected", rejected_ / n},
          {prefix + "rewards/accuracies", correct_ / n},
          {prefix + "rewards/margins", (chosen_ - rejected_) / n},
          {prefix + "logps/chosen", logp_chosen_ / n},
          {prefix + "logps/rejected", logp_rejected_ / n}};
}

}  // namespace st
