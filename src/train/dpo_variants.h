// DPOTrainer's other loss_types (TRL; dpo_loss_type), each a function of one pair's log-ratios
// against the reference, cl = pc - rc and rl = pr - rr (sums over the reply, as DPO's):
//   hinge      relu(1 - beta (cl - rl))                                       (SLiC)
//   robust     (-(1 - e) log s(z) + e log s(-z)) / (1 - 2e),  z = beta (cl - rl)  (rDPO)
//   exo_pair   s(z) (log s(z) - log(1 - e)) + s(-z) (log s(-z) - log e), e = 1e-3 when 0  (EXO)
//   nca_pair   -log s(beta cl) - 0.5 log s(-beta cl) - 0.5 log s(-beta rl)     (NCA)
//   sppo_hard  (cl - 0.5 / beta)^2 + (rl + 0.5 / beta)^2                        (SPPO)
//   apo_zero   1 - s(beta cl) + s(beta rl)                                      (APO)
//   apo_down   s(beta cl) + 1 - s(beta (cl - rl))                               (APO)
//   discopop   -log s(z) (1 - s(z / tau)) + e^-z s(z / tau)                     (DiscoPOP)
//   sigmoid_norm  -log s(beta (cl / nc - rl / nr)), nc, nr the replies' trained tokens (length-normalized DPO)
// with s the sigmoid and e dpo_label_smoothing. The slopes d loss / d cl and d loss / d rl come
// from forward-mode dual numbers through the same expressions (no hand-derived formulas to drift
// from the values); tests/train/preference_loss_test.cc checks them against finite differences.
#pragma once

namespace st {

enum class PreferenceLoss;
struct PreferenceConfig;

// The loss of variant `l` at (cl, rl) and its slopes; false when `l` is not one of these variants.
bool dpo_variant(PreferenceLoss l, const PreferenceConfig& c, double cl, double rl, double nc, double nr, double* loss,
                 double* dcl, double* drl);

}  // namespace st
