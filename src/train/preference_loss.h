// DPO (Rafailov et al. 2023, TRL's DPOTrainer loss_type "sigmoid"), the loss of preference
// training (TrainConfig::rl = "dpo").
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
// Logged as TRL logs them: rewards/chosen = beta (pc - rc) and rewards/rejected (means over the
// pairs), rewards/accuracies (the share of pairs with rewards/chosen > rewards/rejected),
// rewards/margins (mean difference), logps/chosen and logps/rejected (mean pc, pr).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace st {

struct DpoConfig {
  double beta = 0.1;
  double label_smoothing = 0.0;
};

struct DpoPair {
  double policy_chosen = 0, policy_rejected = 0;  // sums of log p over each response
  double ref_chosen = 0, ref_rejected = 0;
};

struct DpoTerms {
  double loss = 0;
  // d loss / d policy_chosen; d loss / d policy_rejected is its negative.
  double dloss_dchosen = 0;
  double reward_chosen = 0, reward_rejected = 0;  // beta (p - r)
};

// One pair's loss, gradient factor and rewards (stable for any z: no overflow of exp).
DpoTerms dpo_terms(const DpoPair& p, const DpoConfig& c);

// Running means of a set of pairs' terms, for the log (Note [DPO]).
class DpoStats {
 public:
  void add(const DpoPair& p, const DpoTerms& t);
  void merge(const DpoStats& o);
  int64_t pairs() const { return n_; }
  double mean_loss() const { return n_ ? loss_ / static_cast<double>(n_) : 0.0; }
  // ("rewards/chosen", mean), ... in TRL's names; a prefix ("eval_") in front of each.
  std::vector<std::pair<std::string, double>> metrics(const std::string& prefix = "") const;

 private:
  int64_t n_ = 0;
  double loss_ = 0, chosen_ = 0, rejected_ = 0, correct_ = 0, logp_chosen_ = 0, logp_rejected_ = 0;
};

}  // namespace st
