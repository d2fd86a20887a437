#include "train/preference_step.h"

#include <algorithm>

#include "data/packing.h"
#include "train/kto_loss.h"

namespace st {

StatusOr<std::vector<std::vector<double>>> reference_logps(Model& m, LayerSource& layers,
                                                           const std::vector<const Batch*>& bs) {
  m.lora().disable_adapter();
  StatusOr<std::vector<std::vector<double>>> ref = m.eval_sequence_logps(bs, layers);
  m.lora().enable_adapter();
  RETURN_IF_ERROR(ref.status(), "the reference forward (the adapter disabled)");
  RETURN_IF_ERROR(layers.status(), "loading base weights for the reference forward");
  return ref;
}

namespace {

// Pair j of a micro-batch: its segments' log p sums (Note [pair segments]) and the reference's.
PreferencePair pair_of(const PairBatch& pb, const std::vector<double>& logp, const std::vector<double>* ref, int64_t j) {
  const size_t c = static_cast<size_t>(2 * j), r = c + 1;
  PreferencePair p{.policy_chosen = logp[c], .policy_rejected = logp[r], .chosen_tokens = pb.reply_tokens[c],
                   .rejected_tokens = pb.reply_tokens[r]};
  if (ref) {
    p.ref_chosen = (*ref)[c];
    p.ref_rejected = (*ref)[r];
  }
  return p;
}

// A micro-batch's mean NLL over its nll_tokens: the chosen replies, with ORPO their prompt segments too.
double mean_nll(const PairBatch& pb, const std::vector<double>& logp, PreferenceLoss loss) {
  double sum = 0;
  for (int64_t j = 0; j < pb.pairs(); ++j) {
    sum += logp[static_cast<size_t>(2 * j)];
    if (nll_covers_prompt(loss)) sum += logp[static_cast<size_t>(prompt_segment(pb.batch.batch, j))];
  }
  return -sum / static_cast<double>(std::max<int64_t>(pb.nll_tokens, 1));
}

// A KTO micro-batch (data/data_loader.h Note [KTO batches]): k examples, then their k KL rows.
StatusOr<int64_t> kto_examples(const Batch& b) {
  const int64_t k = b.batch / 2;
  if (b.batch % 2 != 0 || static_cast<int64_t>(b.kto.size()) != k || k == 0)
    return InvalidArgument(Str() << "a KTO micro-batch holds examples and their KL rows (" << b.batch << " rows, "
                                 << b.kto.size() << " labels)");
  return k;
}

// Example j's terms (train/kto_loss.h) from the policy's and the reference's log p sums by row.
KtoTerms kto_example(const std::vector<int8_t>& labels, const std::vector<double>& policy,
                     const std::vector<double>& ref, int64_t j, double z0, const PreferenceConfig& c,
                     PreferenceStats* stats) {
  const auto i = static_cast<size_t>(j);
  const KtoExample e{.policy = policy[i], .ref = ref[i], .desirable = labels[i] > 0};
  const KtoTerms t = kto_terms(e, z0, c);
  stats->add_kto(e.desirable, e.policy, t.loss, t.reward);
  return t;
}

}  // namespace

StatusOr<PreferenceWindow> PreferenceWindow::prepare(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                                     const std::vector<const Batch*>& batches, int64_t window_units,
                                                     int64_t window_micro_batches, std::vector<PreferenceStats>* stats) {
  PreferenceWindow w;
  w.c_ = c;
  w.per_unit_ = 1.0 / static_cast<double>(std::max<int64_t>(window_units, 1));
  w.window_micro_batches_ = std::max<int64_t>(window_micro_batches, 1);
  stats->assign(batches.size(), PreferenceStats(c));
  const bool kto = c.loss == PreferenceLoss::kKto;
  std::vector<int64_t> examples;  // KTO: per micro-batch
  std::vector<Batch> kl_rows;     // KTO: per micro-batch, its KL rows
  for (const Batch* b : batches) {
    if (kto) {  // train/kto_loss.h Note [KTO]: the examples train, the KL rows give z0
      ASSIGN_OR_RETURN(int64_t k, kto_examples(*b));
      examples.push_back(k);
      kl_rows.push_back(batch_rows(*b, k, k));
      PairBatch pb;
      pb.batch = batch_rows(*b, 0, k);
      pb.batch.kto = b->kto;
      w.pbs_.push_back(std::move(pb));
      continue;
    }
    ASSIGN_OR_RETURN(PairBatch pb, pair_batch(*b, c.loss));
    w.pbs_.push_back(std::move(pb));
  }
  // The micro-batches' reference forwards together (model/model.h Note [layer-major evaluation]):
  // KTO's over all its rows, the pair losses' over the pairs' rows.
  if (kto || uses_reference(c.loss)) {
    std::vector<const Batch*> ref_in = batches;
    if (!kto)
      for (size_t i = 0; i < batches.size(); ++i) ref_in[i] = &w.pbs_[i].batch;
    ASSIGN_OR_RETURN(w.ref_, reference_logps(m, layers, ref_in));
  }
  if (kto) {
    ASSIGN_OR_RETURN(std::vector<std::vector<double>> kl, m.eval_sequence_logps(batch_pointers(kl_rows), layers));
    RETURN_IF_ERROR(layers.status(), "loading base weights for the KL forward");
    for (size_t i = 0; i < batches.size(); ++i) {
      w.z0_.push_back(kto_reference_point(kl[i].data(), w.ref_[i].data() + examples[i], examples[i]));
      (*stats)[i].add_kl(w.z0_.back());
    }
  }
  return w;
}

// The head's gradient is that of sum_segments w * (-log p): w = -d loss / d log p, the pair (or
// example) terms' over the window's units (their mean is the loss) plus the NLL's over each
// micro-batch's NLL tokens (the mean over the window's micro-batches of theirs).
StatusOr<std::vector<double>> PreferenceWindow::forward_backward(Model& m, LayerSource& layers, size_t first, size_t n,
                                                                 std::vector<PreferenceStats>* stats) const {
  CHECK(first + n <= pbs_.size() && stats->size() == pbs_.size());
  const double alpha = nll_weight(c_);
  Model::SequenceWeights weigh = [&](int mb, const std::vector<double>& logp) {
    const size_t i = first + static_cast<size_t>(mb);
    const PairBatch& pb = pbs_[i];
    PreferenceStats& st = (*stats)[i];
    std::vector<float> w(logp.size(), 0.0f);
    if (c_.loss == PreferenceLoss::kKto) {
      for (int64_t j = 0; j < pb.batch.batch; ++j) {
        const KtoTerms t = kto_example(pb.batch.kto, logp, ref_[i], j, z0_[i], c_, &st);
        w[static_cast<size_t>(j)] = static_cast<float>(-t.dloss_dpolicy * per_unit_);
      }
      return w;
    }
    const std::vector<double>* r = ref_.empty() ? nullptr : &ref_[i];
    const double nll = alpha != 0 ? alpha / (static_cast<double>(std::max<int64_t>(pb.nll_tokens, 1)) *
                                             static_cast<double>(window_micro_batches_))
                                  : 0.0;
    for (int64_t j = 0; j < pb.pairs(); ++j) {
      const PreferenceTerms t = preference_terms(pair_of(pb, logp, r, j), c_);
      st.add(t);
      w[static_cast<size_t>(2 * j)] = static_cast<float>(-t.dloss_dchosen * per_unit_ + nll);
      w[static_cast<size_t>(2 * j + 1)] = static_cast<float>(-t.dloss_drejected * per_unit_);
      if (nll_covers_prompt(c_.loss)) w[static_cast<size_t>(prompt_segment(pb.batch.batch, j))] = static_cast<float>(nll);
    }
    if (alpha != 0) st.add_nll(mean_nll(pb, logp, c_.loss));
    return w;
  };
  std::vector<const Batch*> ptrs;
  for (size_t i = first; i < first + n; ++i) ptrs.push_back(&pbs_[i].batch);
  return m.forward_backward(ptrs, layers, std::vector<float>(n, 1.0f), &weigh);
}

StatusOr<std::vector<PreferenceStats>> preference_eval_batches(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                                               const std::vector<Batch>& bs) {
  std::vector<PreferenceStats> stats(bs.size(), PreferenceStats(c));
  if (c.loss == PreferenceLoss::kKto) {  // every row's log p at once: the KL rows' give z0
    std::vector<int64_t> examples;
    for (const Batch& b : bs) {
      ASSIGN_OR_RETURN(int64_t k, kto_examples(b));
      examples.push_back(k);
    }
    const std::vector<const Batch*> in = batch_pointers(bs);
    ASSIGN_OR_RETURN(std::vector<std::vector<double>> ref, reference_logps(m, layers, in));
    ASSIGN_OR_RETURN(std::vector<std::vector<double>> pol, m.eval_sequence_logps(in, layers));
    RETURN_IF_ERROR(layers.status(), "loading base weights");
    for (size_t i = 0; i < bs.size(); ++i) {
      const int64_t k = examples[i];
      const double z0 = kto_reference_point(pol[i].data() + k, ref[i].data() + k, k);
      stats[i].add_kl(z0);
      for (int64_t j = 0; j < k; ++j) kto_example(bs[i].kto, pol[i], ref[i], j, z0, c, &stats[i]);
    }
    return stats;
  }
  std::vector<PairBatch> pbs;
  std::vector<const Batch*> in;
  for (const Batch& b : bs) {
    ASSIGN_OR_RETURN(PairBatch pb, pair_batch(b, c.loss));
    pbs.push_back(std::move(pb));
  }
  for (const PairBatch& pb : pbs) in.push_back(&pb.batch);
  std::vector<std::vector<double>> ref;
  if (uses_reference(c.loss)) {
    ASSIGN_OR_RETURN(ref, reference_logps(m, layers, in));
  }
  ASSIGN_OR_RETURN(std::vector<std::vector<double>> pol, m.eval_sequence_logps(in, layers));
  RETURN_IF_ERROR(layers.status(), "loading base weights");
  for (size_t i = 0; i < pbs.size(); ++i) {
    for (int64_t j = 0; j < pbs[i].pairs(); ++j)
      stats[i].add(preference_terms(pair_of(pbs[i], pol[i], ref.empty() ? nullptr : &ref[i], j), c));
    if (nll_weight(c) != 0) stats[i].add_nll(mean_nll(pbs[i], pol[i], c.loss));
  }
  return stats;
}

StatusOr<std::vector<EvalFigures>> preference_eval_figures(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                                           const std::vector<Batch>& bs) {
  ASSIGN_OR_RETURN(std::vector<PreferenceStats> stats, preference_eval_batches(m, layers, c, bs));
  std::vector<EvalFigures> out;
  for (const PreferenceStats& s : stats) out.push_back(s.sums());
  return out;
}

StatusOr<PreferenceStats> preference_stats_of(const PreferenceConfig& c, const std::vector<EvalFigures>& figures) {
  PreferenceStats stats(c);
  for (const EvalFigures& f : figures) stats.add_sums(f);  // in batch order (Note [eval figures])
  if (stats.pairs() == 0) return InvalidArgument("the eval dataset has no preference pairs");
  return stats;
}

StatusOr<PreferenceStats> evaluate_preference(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                              BatchSource& data, const EvalProgress* progress) {
  ASSIGN_OR_RETURN(std::vector<EvalFigures> f,
                   eval_pass(data, m.eval_group_size(layers),
                             [&](const std::vector<Batch>& bs) { return preference_eval_figures(m, layers, c, bs); },
                             progress));
  return preference_stats_of(c, f);
}

}  // namespace st
