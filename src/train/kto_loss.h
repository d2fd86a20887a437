// KTO (Ethayarajh et al. 2024, "KTO: Model Alignment as Prospect Theoretic Optimization"; TRL's
// KTOTrainer, loss_type "kto"): preference training on unpaired examples, each a prompt, one
// response and a label saying whether the response is desirable (rl: kto).
//
// Note [KTO]: with r = p - q the example's log-ratio (p, q: the summed log p of its response's
// tokens under the model being trained and under the reference, the adapter-disabled base as for
// DPO) and z0 the reference point,
//   desirable:    loss = w_d (1 - sigmoid(beta (r - z0)))
//   undesirable:  loss = w_u (1 - sigmoid(beta (z0 - r)))
// (w_d, w_u: kto_desirable_weight / kto_undesirable_weight), and a micro-batch's loss is the mean
// over its examples (TRL's nanmean of the weighted losses); a window's, the mean over its examples.
// z0 estimates KL(policy || reference) from the micro-batch's KL sequences -- each example's
// prompt with another example's response (data/data_loader.h Note [KTO batches]) --
//   z0 = max(0, mean over the micro-batch of (p_kl - q_kl)),
// and carries no gradient (TRL computes it under no_grad and detaches it). So the loss depends on
// the trained tokens only through p, and each response token's gradient is its cross-entropy
// gradient times -d loss / d p (model/model.h Note [sequence weights]), as for DPO. The KL
// sequences run forward only, without dropout (TRL's run in train mode: the same with
// lora_dropout 0, the default).
//
// Logged as TRL logs them: rewards/chosen and rewards/rejected (beta r, means over the desirable
// and the undesirable examples), rewards/margins (their difference, where both occur),
// logps/chosen and logps/rejected (the means of p) and kl (z0, the mean over micro-batches).
#pragma once

#include <cstdint>

#include "train/preference_loss.h"

namespace st {

struct KtoExample {
  double policy = 0, ref = 0;  // sums of log p over the response's trained tokens
  bool desirable = true;
};

struct KtoTerms {
  double loss = 0;           // weighted
  double dloss_dpolicy = 0;  // d loss / d policy
  double reward = 0;         // beta (policy - ref)
};

// One example's loss and slope at reference point z0 (Note [KTO]); stable for any input.
KtoTerms kto_terms(const KtoExample& e, double z0, const PreferenceConfig& c);

// z0 of a micro-batch: max(0, mean_j (policy_kl[j] - ref_kl[j])) over n KL sequences; 0 when n is 0.
double kto_reference_point(const double* policy_kl, const double* ref_kl, int64_t n);

}  // namespace st
