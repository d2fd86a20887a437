// Preference losses (TrainConfig::rl): DPO (Rafailov et al. 2023; TRL's DPOTrainer loss_type
// "sigmoid"), IPO (Azar et al. 2023; DPOTrainer loss_type "ipo"), ORPO (Hong et al. 2024; TRL's
// ORPOTrainer) and SimPO (Meng et al. 2024; TRL's CPOTrainer loss_type "simpo"); KTO on unpaired
// examples (train/kto_loss.h) shares their configuration, names and statistics.
//
// Note [DPO]: each training example is a pair of sequences sharing a prompt, the chosen and the
// rejected response (data/datasets.h Sample::pair). With policy log-probabilities pc, pr (the sum
// of log p over each response's tokens under the model being trained) and the same sums rc, rr
// under the reference model,
//   z = beta * ((pc - rc) - (pr - rr)),   loss = -(1 - eps) log sigmoid(z) - eps log sigmoid(-z)
// (eps: dpo_label_smoothing, "conservative DPO"; 0 is plain DPO). A window's loss is the mean over
// its pairs. The loss depends on the tokens only through pc and pr, so its gradient is each
// response token's cross-entropy gradient (d(-log p)) times the factor -d loss / d p of its
// sequence -- which the head applies (model/model.h Note [sequence weights]); nothing else in the
// backward changes.
//
// The reference is the base model: the adapter disabled (PEFT's disable_adapter, what TRL uses for
// a PEFT model without a ref_model), computed beside each step by a forward with every LoRA B set
// to zero (model/lora.h Note [adapter disabled]) -- so a run that starts from an adapter
// (lora_model_dir) or resumes still measures against the base.
//
// Note [reference-free and length-normalized losses]: the others, as TRL computes them, with
// a = p / n the mean log p over a response's n trained tokens:
//   IPO:   h = (ac - arc) - (ar - arr) (means, the reference's too), loss = (h - 1 / (2 beta))^2.
//   ORPO:  lo = (ac - ar) - (log(1 - e^ac) - log(1 - e^ar)) (the log odds ratio),
//          loss = NLL - beta log sigmoid(lo); no reference model.
//   SimPO: z = beta (ac - ar) - gamma (simpo_gamma), loss = -(1 - eps) log sigmoid(z) - eps log
//          sigmoid(-z) + cpo_alpha NLL; no reference model.
// NLL is a micro-batch's mean cross-entropy over its chosen sequences' tokens: for SimPO (and DPO
// or IPO with rpo_alpha: TRL's RPO, loss + rpo_alpha NLL) the trained response tokens (TRL's CPOTrainer), for ORPO every token of the chosen sequence, prompt
// included (TRL's ORPOTrainer: "computed over the full prompt and response"); a window's NLL is the
// mean over its micro-batches (TRL's per-micro-batch loss, averaged over accumulation steps). The
// pair terms still depend on the tokens only through pc and pr, and the NLL adds a constant
// factor per token, so each token's gradient is again its cross-entropy gradient times one factor
// -- its segment's (model/model.h Note [sequence weights]: a chosen row's prompt tokens are a
// segment of their own under ORPO).
//
// Logged as TRL logs them: rewards/chosen and rewards/rejected (DPO, IPO: beta (p - r), of the means
// for IPO; ORPO, SimPO: beta a), rewards/accuracies (the share of pairs whose chosen reward is the
// larger), rewards/margins, logps/chosen and logps/rejected (pc, pr; the means a for IPO, ORPO and
// SimPO); ORPO adds nll_loss, log_odds_ratio (mean log sigmoid(lo)) and log_odds_chosen (mean lo),
// SimPO nll_loss (0 with cpo_alpha 0, as TRL), DPO and IPO nll_loss with rpo_alpha. TRL's logits/chosen and logits/rejected (the mean
// logit over the vocabulary) are not computed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace st {

struct TrainConfig;

// kDpo is DPO's sigmoid loss; kHinge .. kDiscopop are DPOTrainer's other loss_types
// (train/dpo_variants.h), on the same summed log-ratios against the reference.
enum class PreferenceLoss { kDpo, kIpo, kOrpo, kSimpo, kHinge, kRobust, kExoPair, kNcaPair, kSppoHard, kApoZero,
                            kApoDown, kDiscopop, kSigmoidNorm, kKto };

struct PreferenceConfig {
  PreferenceLoss loss = PreferenceLoss::kDpo;
  double beta = 0.1;
  double label_smoothing = 0.0;  // DPO, SimPO
  double simpo_gamma = 0.5;      // SimPO's target margin
  double cpo_alpha = 1.0;        // SimPO's NLL weight
  double rpo_alpha = 0.0;        // DPO's and IPO's NLL weight (TRL's RPO); 0 = none
  double discopop_tau = 0.05;    // DiscoPOP's temperature
  double desirable_weight = 1.0, undesirable_weight = 1.0;  // KTO's
};

// The preference loss of TrainConfig::rl (dpo_loss_type resolved), its keys checked; rl must be set.
StatusOr<PreferenceConfig> preference_config_from(const TrainConfig& tc);
// "dpo", "ipo", "orpo", "simpo" and DPOTrainer's loss_type names ("hinge", "robust", "exo_pair",
// "nca_pair", "sppo_hard", "apo_zero", "apo_down", "discopop", "sigmoid_norm"): the loss; false for others.
bool preference_loss_from_name(const std::string& name, PreferenceLoss* out);
const char* preference_loss_name(PreferenceLoss l);   // "dpo", ...
const char* preference_loss_title(PreferenceLoss l);  // "DPO", "IPO", "ORPO", "SimPO", "DPO (hinge)", ...
// Whether the loss compares against the reference (the adapter-disabled base): all but ORPO, SimPO.
// (KTO's examples are not pairs: train/kto_loss.h; the others' are.)
bool uses_reference(PreferenceLoss l);
// The NLL term's weight (0: none) and whether it covers the chosen sequence's prompt too (ORPO).
double nll_weight(const PreferenceConfig& c);
bool nll_covers_prompt(PreferenceLoss l);
// One line for banners and model cards: "DPO: sigmoid loss, beta 0.1; reference: the base model ...".
std::string preference_summary(const PreferenceConfig& c);

struct PreferencePair {
  double policy_chosen = 0, policy_rejected = 0;  // sums of log p over each response's trained tokens
  double ref_chosen = 0, ref_rejected = 0;        // the reference's (DPO, IPO)
  int64_t chosen_tokens = 1, rejected_tokens = 1; // the responses' trained tokens (IPO, ORPO, SimPO: > 0)
};

struct PreferenceTerms {
  double loss = 0;  // the pair's part of the loss (without NLL)
  // d loss / d policy_chosen and d loss / d policy_rejected (the sums).
  double dloss_dchosen = 0, dloss_drejected = 0;
  double reward_chosen = 0, reward_rejected = 0;
  double logp_chosen = 0, logp_rejected = 0;  // as logged: the sums (DPO) or the means
  double log_odds = 0, log_odds_ratio = 0;    // ORPO: lo and log sigmoid(lo)
};

// One pair's loss, gradient factors and logged values; stable for any input (no overflow of exp).
PreferenceTerms preference_terms(const PreferencePair& p, const PreferenceConfig& c);

// Running means of a set of pairs' terms and micro-batches' NLL, for the loss and the log.
class PreferenceStats {
 public:
  explicit PreferenceStats(const PreferenceConfig& c = {}) : c_(c) {}
  void add(const PreferenceTerms& t);
  void add_nll(double mean_nll);  // one micro-batch's mean NLL (kinds with an NLL term)
  // KTO (train/kto_loss.h): one example (counted as pairs() counts pairs), one micro-batch's z0.
  void add_kto(bool desirable, double policy, double loss, double reward);
  void add_kl(double z0);
  void merge(const PreferenceStats& o);
  // Every running sum and count as a number (counts are exact in a double), for reductions across
  // devices: add_sums(o.sums()) is merge(o).
  std::vector<double> sums() const;
  void add_sums(const std::vector<double>& s);
  int64_t pairs() const { return n_; }  // pairs, or KTO's examples
  // Mean pair loss + nll_weight x mean NLL: the window's (or eval set's) loss.
  double mean_loss() const;
  // ("rewards/chosen", mean), ... in TRL's names; a prefix ("eval_") in front of each.
  std::vector<std::pair<std::string, double>> metrics(const std::string& prefix = "") const;

 private:
  PreferenceConfig c_;
  int64_t n_ = 0, nll_n_ = 0;
  double loss_ = 0, chosen_ = 0, rejected_ = 0, correct_ = 0, logp_chosen_ = 0, logp_rejected_ = 0;
  double nll_ = 0, log_odds_ = 0, log_odds_ratio_ = 0;
  // KTO: per label (0 desirable, 1 undesirable) the examples, their rewards and log p sums; z0s.
  int64_t kto_n_[2] = {0, 0}, kl_n_ = 0;
  double kto_reward_[2] = {0, 0}, kto_logp_[2] = {0, 0}, kl_ = 0;
};

}  // namespace st
