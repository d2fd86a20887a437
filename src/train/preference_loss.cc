#include "train/preference_loss.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/check.h"
#include "train/dpo_variants.h"
#include "train/train_config.h"

namespace st {
namespace {

// log sigmoid(z) = -softplus(-z), written so that neither branch overflows.
double log_sigmoid(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }
double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

// A mean log p of ORPO's odds, held below 0: a response whose every token has p = 1 in f32 would
// give log(1 - e^0) = -inf (TRL's NaN); -1e-12 keeps the log odds finite (log 1e-12 = -27.6).
constexpr double kMaxMeanLogp = -1e-12;
// log(1 - e^a) for a < 0, accurate on both sides of a = -ln 2.
double log1mexp(double a) { return a > -M_LN2 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a)); }

// The smoothed sigmoid loss of DPO and SimPO at z, and its slope d loss / dz.
void smoothed_sigmoid(double z, double eps, double* loss, double* slope) {
  *loss = -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
  // d/dz [-log sigmoid(z)] = -sigmoid(-z); d/dz [-log sigmoid(-z)] = sigmoid(z).
  *slope = -(1 - eps) * sigmoid(-z) + eps * sigmoid(z);
}

double mean_of(double sum, int64_t n) { return sum / static_cast<double>(std::max<int64_t>(n, 1)); }

}  // namespace

StatusOr<PreferenceConfig> preference_config_from(const TrainConfig& tc) {
  PreferenceConfig c;
  const std::string kind = preference_loss_kind(tc);
  if (tc.dpo_loss_type != "sigmoid" && tc.rl != "dpo" && !(tc.rl == "ipo" && tc.dpo_loss_type == "ipo"))
    return InvalidArgument(Str() << "dpo_loss_type: " << tc.dpo_loss_type << " applies to rl: dpo, not rl: " << tc.rl);
  if (!preference_loss_from_name(kind, &c.loss) || (tc.rl == "dpo" && (c.loss == PreferenceLoss::kOrpo ||
                                                                         c.loss == PreferenceLoss::kSimpo)))
    return Unimplemented(Str() << (tc.rl == "dpo" ? "dpo_loss_type: " + kind : "rl: " + tc.rl)
                               << " is not supported (rl: dpo, ipo, orpo, simpo; dpo_loss_type: sigmoid, ipo, hinge, "
                                  "robust, exo_pair, nca_pair, sppo_hard, apo_zero, apo_down, discopop, sigmoid_norm)");
  if (tc.rl == "dpo" && c.loss == PreferenceLoss::kKto)
    return InvalidArgument("dpo_loss_type: kto is not a DPO loss; KTO is rl: kto (unpaired examples)");
  // How messages name the loss: "rl: orpo", or "rl: dpo, dpo_loss_type: hinge".
  const std::string what = kind == tc.rl ? "rl: " + kind : "rl: " + tc.rl + ", dpo_loss_type: " + kind;
  c.beta = tc.rl_beta;
  c.label_smoothing = tc.dpo_label_smoothing;
  c.simpo_gamma = tc.simpo_gamma;
  c.cpo_alpha = tc.cpo_alpha;
  c.rpo_alpha = tc.rpo_alpha;
  c.discopop_tau = tc.discopop_tau;
  if (!(c.discopop_tau > 0)) return InvalidArgument(Str() << "discopop_tau must be > 0, got " << c.discopop_tau);
  c.desirable_weight = tc.kto_desirable_weight;
  c.undesirable_weight = tc.kto_undesirable_weight;
  if (c.rpo_alpha > 0 && (!uses_reference(c.loss) || c.loss == PreferenceLoss::kKto))
    return InvalidArgument(Str() << "rpo_alpha applies to rl: dpo and ipo, not " << kind
                                 << (c.loss == PreferenceLoss::kSimpo ? " (SimPO's NLL weight is cpo_alpha)" : ""));
  if (!(c.beta > 0)) return InvalidArgument(Str() << "rl_beta must be > 0, got " << c.beta);
  if (c.label_smoothing < 0 || c.label_smoothing >= 0.5)
    return InvalidArgument(Str() << "dpo_label_smoothing must be in [0, 0.5), got " << c.label_smoothing);
  const bool smooths = c.loss == PreferenceLoss::kDpo || c.loss == PreferenceLoss::kSimpo ||
                       c.loss == PreferenceLoss::kRobust || c.loss == PreferenceLoss::kExoPair;
  if (c.label_smoothing > 0 && !smooths)
    return InvalidArgument(Str() << "dpo_label_smoothing applies to rl: dpo (sigmoid, robust, exo_pair) and simpo, not "
                                 << kind);
  if (!(c.cpo_alpha >= 0) || !std::isfinite(c.simpo_gamma))
    return InvalidArgument("cpo_alpha must be >= 0 and simpo_gamma finite");
  if (c.loss == PreferenceLoss::kKto && tc.micro_batch_size < 2)
    return InvalidArgument(Str() << "rl: kto estimates its reference point from the other examples of a micro-batch "
                                 << "(their prompts with each other's responses): micro_batch_size must be at least 2, got "
                                 << tc.micro_batch_size << " (TRL refuses 1 too)");
  if (!(c.desirable_weight >= 0) || !(c.undesirable_weight >= 0) || c.desirable_weight + c.undesirable_weight <= 0)
    return InvalidArgument("kto_desirable_weight and kto_undesirable_weight must be >= 0, and not both 0");
  if (tc.use_dora && uses_reference(c.loss))
    return Unimplemented(Str() << what << " with use_dora is not supported (the reference is the "
                               << "adapter-disabled model; DoRA's magnitudes rescale the base even with B = 0)");
  if (tc.sample_packing)
    return InvalidArgument(Str() << what << " trains on one sequence a row; sample_packing does not "
                                 << "apply (set it false)");
  if (tc.neftune_noise_alpha > 0)
    return Unimplemented(Str() << what << " with neftune_noise_alpha is not supported");
  return c;
}

namespace {
struct LossName {
  PreferenceLoss loss;
  const char* name;
  const char* title;
};
constexpr LossName kLosses[] = {
    {PreferenceLoss::kDpo, "dpo", "DPO"},
    {PreferenceLoss::kIpo, "ipo", "IPO"},
    {PreferenceLoss::kOrpo, "orpo", "ORPO"},
    {PreferenceLoss::kSimpo, "simpo", "SimPO"},
    {PreferenceLoss::kHinge, "hinge", "DPO (hinge)"},
    {PreferenceLoss::kRobust, "robust", "DPO (robust)"},
    {PreferenceLoss::kExoPair, "exo_pair", "DPO (exo_pair)"},
    {PreferenceLoss::kNcaPair, "nca_pair", "DPO (nca_pair)"},
    {PreferenceLoss::kSppoHard, "sppo_hard", "DPO (sppo_hard)"},
    {PreferenceLoss::kApoZero, "apo_zero", "DPO (apo_zero)"},
    {PreferenceLoss::kApoDown, "apo_down", "DPO (apo_down)"},
    {PreferenceLoss::kDiscopop, "discopop", "DPO (discopop)"},
    {PreferenceLoss::kSigmoidNorm, "sigmoid_norm", "DPO (sigmoid_norm)"},
    {PreferenceLoss::kKto, "kto", "KTO"},
};
}  // namespace

bool preference_loss_from_name(const std::string& name, PreferenceLoss* out) {
  for (const LossName& l : kLosses)
    if (name == l.name) {
      *out = l.loss;
      return true;
    }
  return false;
}

const char* preference_loss_name(PreferenceLoss l) {
  for (const LossName& n : kLosses)
    if (n.loss == l) return n.name;
  return "?";
}

const char* preference_loss_title(PreferenceLoss l) {
  for (const LossName& n : kLosses)
    if (n.loss == l) return n.title;
  return "?";
}

bool uses_reference(PreferenceLoss l) { return l != PreferenceLoss::kOrpo && l != PreferenceLoss::kSimpo; }

double nll_weight(const PreferenceConfig& c) {
  if (c.loss == PreferenceLoss::kOrpo) return 1.0;
  if (c.loss == PreferenceLoss::kSimpo) return c.cpo_alpha;
  return c.rpo_alpha;
}

bool nll_covers_prompt(PreferenceLoss l) { return l == PreferenceLoss::kOrpo; }

std::string preference_summary(const PreferenceConfig& c) {
  std::ostringstream o;
  o << std::setprecision(6);
  const std::string eps = c.label_smoothing > 0 ? (std::ostringstream() << ", label smoothing " << c.label_smoothing).str() : "";
  const char* ref = "; reference: the base model (the adapter disabled)";
  const std::string rpo =
      c.rpo_alpha > 0 ? (std::ostringstream() << " + rpo_alpha " << c.rpo_alpha << " x NLL of the chosen reply").str() : "";
  switch (c.loss) {
    case PreferenceLoss::kDpo: o << "DPO: sigmoid loss, beta " << c.beta << eps << rpo << ref; break;
    case PreferenceLoss::kIpo: o << "IPO: squared loss on mean log-probs, beta " << c.beta << rpo << ref; break;
    case PreferenceLoss::kOrpo:
      o << "ORPO: NLL of the chosen sequence + beta " << c.beta << " x odds-ratio loss; no reference model"; break;
    case PreferenceLoss::kKto:
      o << "KTO: beta " << c.beta << ", desirable weight " << c.desirable_weight << ", undesirable weight "
        << c.undesirable_weight << "; reference point from mismatched pairs in each micro-batch" << ref;
      break;
    case PreferenceLoss::kSimpo:
      o << "SimPO: beta " << c.beta << ", gamma " << c.simpo_gamma << eps << ", NLL weight (cpo_alpha) " << c.cpo_alpha
        << "; no reference model";
      break;
    default:
      o << preference_loss_title(c.loss) << ": beta " << c.beta << eps << rpo;
      if (c.loss == PreferenceLoss::kDiscopop) o << ", tau " << c.discopop_tau;
      o << ref;
      break;
  }
  return o.str();
}

PreferenceTerms preference_terms(const PreferencePair& p, const PreferenceConfig& c) {
  PreferenceTerms t;
  const double nc = static_cast<double>(std::max<int64_t>(p.chosen_tokens, 1));
  const double nr = static_cast<double>(std::max<int64_t>(p.rejected_tokens, 1));
  const double ac = p.policy_chosen / nc, ar = p.policy_rejected / nr;  // the means
  // Logged as TRL logs them: the sums for DPO, the means otherwise; without a reference the
  // rewards are beta x the means.
  const bool sums = c.loss != PreferenceLoss::kIpo && uses_reference(c.loss);
  t.logp_chosen = sums ? p.policy_chosen : ac;
  t.logp_rejected = sums ? p.policy_rejected : ar;
  if (!uses_reference(c.loss)) {
    t.reward_chosen = c.beta * ac;
    t.reward_rejected = c.beta * ar;
  }
  switch (c.loss) {
    case PreferenceLoss::kDpo: {
      t.reward_chosen = c.beta * (p.policy_chosen - p.ref_chosen);
      t.reward_rejected = c.beta * (p.policy_rejected - p.ref_rejected);
      double slope = 0;
      smoothed_sigmoid(t.reward_chosen - t.reward_rejected, c.label_smoothing, &t.loss, &slope);
      t.dloss_dchosen = c.beta * slope;  // dz/dpc = beta, dz/dpr = -beta
      t.dloss_drejected = -t.dloss_dchosen;
      break;
    }
    case PreferenceLoss::kIpo: {
      const double rc = ac - p.ref_chosen / nc, rr = ar - p.ref_rejected / nr;
      const double d = (rc - rr) - 1.0 / (2.0 * c.beta);
      t.loss = d * d;
      t.dloss_dchosen = 2.0 * d / nc;  // dh/dpc = 1 / nc
      t.dloss_drejected = -2.0 * d / nr;
      t.reward_chosen = c.beta * rc;
      t.reward_rejected = c.beta * rr;
      break;
    }
    case PreferenceLoss::kOrpo: {
      const double mc = std::min(ac, kMaxMeanLogp), mr = std::min(ar, kMaxMeanLogp);
      t.log_odds = (mc - mr) - (log1mexp(mc) - log1mexp(mr));
      t.log_odds_ratio = log_sigmoid(t.log_odds);
      t.loss = -c.beta * t.log_odds_ratio;
      // d loss / d lo = -beta sigmoid(-lo); d lo / d a = 1 / (1 - e^a) for the chosen, minus that
      // for the rejected; d a / d p = 1 / n. (At the clamp the slope is the clamped point's.)
      const double g = -c.beta * sigmoid(-t.log_odds);
      t.dloss_dchosen = g / -std::expm1(mc) / nc;
      t.dloss_drejected = -g / -std::expm1(mr) / nr;
      break;
    }
    default: {  // DPOTrainer's other loss_types (train/dpo_variants.h): DPO's sums and rewards
      t.reward_chosen = c.beta * (p.policy_chosen - p.ref_chosen);
      t.reward_rejected = c.beta * (p.policy_rejected - p.ref_rejected);
      dpo_variant(c.loss, c, p.policy_chosen - p.ref_chosen, p.policy_rejected - p.ref_rejected, nc, nr, &t.loss,
                  &t.dloss_dchosen, &t.dloss_drejected);
      break;
    }
    case PreferenceLoss::kSimpo: {
      double slope = 0;
      smoothed_sigmoid(c.beta * (ac - ar) - c.simpo_gamma, c.label_smoothing, &t.loss, &slope);
      t.dloss_dchosen = slope * c.beta / nc;
      t.dloss_drejected = -slope * c.beta / nr;
      break;
    }
  }
  return t;
}

void PreferenceStats::add(const PreferenceTerms& t) {
  ++n_;
  loss_ += t.loss;
  chosen_ += t.reward_chosen;
  rejected_ += t.reward_rejected;
  correct_ += t.reward_chosen > t.reward_rejected ? 1.0 : 0.0;
  logp_chosen_ += t.logp_chosen;
  logp_rejected_ += t.logp_rejected;
  log_odds_ += t.log_odds;
  log_odds_ratio_ += t.log_odds_ratio;
}

void PreferenceStats::add_nll(double mean_nll) {
  ++nll_n_;
  nll_ += mean_nll;
}

void PreferenceStats::add_kto(bool desirable, double policy, double loss, double reward) {
  ++n_;
  loss_ += loss;
  const int i = desirable ? 0 : 1;
  ++kto_n_[i];
  kto_reward_[i] += reward;
  kto_logp_[i] += policy;
}

void PreferenceStats::add_kl(double z0) {
  ++kl_n_;
  kl_ += z0;
}

void PreferenceStats::merge(const PreferenceStats& o) {
  for (int i = 0; i < 2; ++i) {
    kto_n_[i] += o.kto_n_[i];
    kto_reward_[i] += o.kto_reward_[i];
    kto_logp_[i] += o.kto_logp_[i];
  }
  kl_n_ += o.kl_n_;
  kl_ += o.kl_;
  n_ += o.n_;
  nll_n_ += o.nll_n_;
  loss_ += o.loss_;
  chosen_ += o.chosen_;
  rejected_ += o.rejected_;
  correct_ += o.correct_;
  logp_chosen_ += o.logp_chosen_;
  logp_rejected_ += o.logp_rejected_;
  nll_ += o.nll_;
  log_odds_ += o.log_odds_;
  log_odds_ratio_ += o.log_odds_ratio_;
}

std::vector<double> PreferenceStats::sums() const {
  return {static_cast<double>(n_), static_cast<double>(nll_n_), loss_, chosen_, rejected_, correct_, logp_chosen_,
          logp_rejected_, nll_, log_odds_, log_odds_ratio_, static_cast<double>(kto_n_[0]),
          static_cast<double>(kto_n_[1]), static_cast<double>(kl_n_), kto_reward_[0], kto_reward_[1], kto_logp_[0],
          kto_logp_[1], kl_};
}

void PreferenceStats::add_sums(const std::vector<double>& s) {
  CHECK(s.size() == sums().size(), "PreferenceStats::add_sums: " << s.size() << " numbers");
  PreferenceStats o(c_);
  size_t i = 0;
  o.n_ = static_cast<int64_t>(s[i++]);
  o.nll_n_ = static_cast<int64_t>(s[i++]);
  for (double* d : {&o.loss_, &o.chosen_, &o.rejected_, &o.correct_, &o.logp_chosen_, &o.logp_rejected_, &o.nll_,
                    &o.log_odds_, &o.log_odds_ratio_})
    *d = s[i++];
  for (int64_t* n : {&o.kto_n_[0], &o.kto_n_[1], &o.kl_n_}) *n = static_cast<int64_t>(s[i++]);
  for (double* d : {&o.kto_reward_[0], &o.kto_reward_[1], &o.kto_logp_[0], &o.kto_logp_[1], &o.kl_}) *d = s[i++];
  merge(o);
}

double PreferenceStats::mean_loss() const {
  const double w = nll_weight(c_);
  return mean_of(loss_, n_) + (w != 0 ? w * mean_of(nll_, nll_n_) : 0.0);
}

std::vector<std::pair<std::string, double>> PreferenceStats::metrics(const std::string& prefix) const {
  if (c_.loss == PreferenceLoss::kKto) {  // train/kto_loss.h: per label, where it occurs
    std::vector<std::pair<std::string, double>> m;
    const char* side[2] = {"chosen", "rejected"};
    for (int i = 0; i < 2; ++i)
      if (kto_n_[i] > 0) {
        m.push_back({prefix + "rewards/" + side[i], mean_of(kto_reward_[i], kto_n_[i])});
        m.push_back({prefix + "logps/" + side[i], mean_of(kto_logp_[i], kto_n_[i])});
      }
    if (kto_n_[0] > 0 && kto_n_[1] > 0)
      m.push_back({prefix + "rewards/margins", mean_of(kto_reward_[0], kto_n_[0]) - mean_of(kto_reward_[1], kto_n_[1])});
    m.push_back({prefix + "kl", mean_of(kl_, kl_n_)});
    return m;
  }
  std::vector<std::pair<std::string, double>> m = {{prefix + "rewards/chosen", mean_of(chosen_, n_)},
                                                   {prefix + "rewards/rejected", mean_of(rejected_, n_)},
                                                   {prefix + "rewards/accuracies", mean_of(correct_, n_)},
                                                   {prefix + "rewards/margins", mean_of(chosen_ - rejected_, n_)},
                                                   {prefix + "logps/chosen", mean_of(logp_chosen_, n_)},
                                                   {prefix + "logps/rejected", mean_of(logp_rejected_, n_)}};
  if (c_.loss == PreferenceLoss::kOrpo || c_.loss == PreferenceLoss::kSimpo || c_.rpo_alpha > 0)
    m.push_back({prefix + "nll_loss", nll_weight(c_) != 0 ? mean_of(nll_, nll_n_) : 0.0});
  if (c_.loss == PreferenceLoss::kOrpo) {
    m.push_back({prefix + "log_odds_ratio", mean_of(log_odds_ratio_, n_)});
    m.push_back({prefix + "log_odds_chosen", mean_of(log_odds_, n_)});
  }
  return m;
}

}  // namespace st
