// Model's evaluation: one batch at a time, or several through the layers together where they
// stream (model.h Note [layer-major evaluation]).
#include "model/model.h"

#include <algorithm>
#include <vector>

#include "model/layer.h"
#include "model/model_internals.h"

namespace st {

// The eval forward and head of one batch (no dropout, no gradient): its loss sum left in slot 0's
// loss; with row_logp, each head row's log p too (head_loss).
Status Model::eval_forward(const Batch& b, LayerSource& src, std::vector<double>* row_logp) {
  RETURN_IF_ERROR(forward_one(b, src));
  Slot& a = slot();
  be_->memset_zero(a.loss.data, sizeof(float), StreamId::kCompute);
  head_loss(make_head_ctx(cfg_, be_, opts_, a.n, a_->head_scratch, a.head_rows), final_norm(), *head_,
            rows_of(a.ckpt[cfg_.num_layers], a.n), head_labels(a.labels, a.head_labels, a.head_rows), a.loss,
            row_logp);
  return Status::OK();
}

StatusOr<double> Model::eval_loss_sum(const Batch& b, LayerSource& src) {
  RETURN_IF_ERROR(eval_forward(b, src, nullptr));
  float loss = 0;
  be_->copy_d2h(&loss, slot().loss.data, sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  return static_cast<double>(loss);
}

StatusOr<std::vector<double>> Model::eval_sequence_logps(const Batch& b, LayerSource& src) {
  std::vector<double> row_logp;
  RETURN_IF_ERROR(eval_forward(b, src, &row_logp));
  be_->sync_stream(StreamId::kCompute);
  RETURN_IF_ERROR(src.status(), "evaluation forward");
  if (row_logp.empty()) return std::vector<double>(static_cast<size_t>(segment_count(b)), 0.0);
  return sequence_sums(head_row_sequences(b, opts_.head_trained_rows), row_logp, segment_count(b));
}

int Model::eval_group_size(const LayerSource& src) const {
  return src.loads_layers() ? std::max<int>(1, static_cast<int>(a_->eval_slots.size())) : 1;
}

// Note [layer-major evaluation]: batch j of the n in eval slot j, its hidden state rotating
// through slot 0's checkpoint buffers 0..n.
Status Model::eval_group(const std::vector<const Batch*>& bs, LayerSource& src, std::vector<float>* losses,
                         std::vector<std::vector<double>>* rows) {
  const int n = static_cast<int>(bs.size()), L = static_cast<int>(cfg_.num_layers);
  const int first = static_cast<int>(a_->slots.size());
  CHECK(n >= 2 && n <= static_cast<int>(a_->eval_slots.size()) && n <= L);
  CHECK(head_ != nullptr, "Model: extras were never loaded");
  auto buffer = [&](int j, int l) {  // holds batch j's input to layer l (its output of layer l - 1)
    return a_->slots[0].ckpt[static_cast<size_t>(((j - l) % (n + 1) + (n + 1)) % (n + 1))];
  };
  auto hidden = [&](int j, int l) { return rows_of(buffer(j, l), a_->eval_slots[static_cast<size_t>(j)].n); };
  for (int j = 0; j < n; ++j) {
    cur_ = first + j;
    embed(*bs[static_cast<size_t>(j)], micro_counter_);
  }
  src.begin_step(StepSchedule::forward_only(L).layers());
  for (int l = 0; l < L; ++l) {
    LayerWeights w = src.acquire(l);
    const LoraLayer& lora = lora_->layer(l);
    for (int j = 0; j < n; ++j) {
      cur_ = first + j;
      const LayerCtx ctx = layer_ctx(l, /*train=*/false);
      plans_->run({}, /*recordable=*/false, [&] { layer_forward(ctx, w, lora, hidden(j, l), hidden(j, l + 1)); });
    }
    src.release(l);
  }
  src.end_step();
  std::vector<HeadLossBatch> heads;  // head.h Note [grouped head]: one pass over the lm_head
  for (int j = 0; j < n; ++j) {
    Slot& a = a_->eval_slots[static_cast<size_t>(j)];
    be_->memset_zero(a.loss.data, sizeof(float), StreamId::kCompute);
    heads.push_back({.ctx = make_head_ctx(cfg_, be_, opts_, a.n, a_->head_scratch, a.head_rows),
                     .x = buffer(j, L),
                     .labels = head_labels(a.labels, a.head_labels, a.head_rows),
                     .loss_sum = a.loss,
                     .rstd = a.rstd, .m = a.m, .s = a.s, .tgt = a.tgt,
                     .row_logp = rows ? &(*rows)[static_cast<size_t>(j)] : nullptr});
  }
  head_losses(heads, /*spare=*/buffer(n, L), final_norm(), *head_);  // the buffer no batch holds
  for (int j = 0; j < n; ++j)
    be_->copy_d2h(&(*losses)[static_cast<size_t>(j)], a_->eval_slots[static_cast<size_t>(j)].loss.data, sizeof(float),
                  StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  cur_ = 0;
  return Status::OK();
}

Status Model::eval_batches(const std::vector<const Batch*>& bs, LayerSource& src, std::vector<float>* losses,
                           std::vector<std::vector<double>>* rows) {
  for (const Batch* b : bs) RETURN_IF_ERROR(validate(*b));
  losses->assign(bs.size(), 0.0f);
  if (rows) rows->assign(bs.size(), {});
  const size_t g = static_cast<size_t>(eval_group_size(src));
  for (size_t i = 0; i < bs.size(); i += g) {
    const size_t n = std::min(g, bs.size() - i);
    if (n == 1) {  // one at a time: slot 0, its visits recorded as launch plans
      RETURN_IF_ERROR(eval_forward(*bs[i], src, rows ? &(*rows)[i] : nullptr));
      be_->copy_d2h(&(*losses)[i], slot().loss.data, sizeof(float), StreamId::kCompute);
      be_->sync_stream(StreamId::kCompute);
    } else {
      std::vector<float> l(n);
      std::vector<std::vector<double>> r(rows ? n : 0);
      RETURN_IF_ERROR(eval_group({bs.begin() + static_cast<std::ptrdiff_t>(i), bs.begin() + static_cast<std::ptrdiff_t>(i + n)},
                                 src, &l, rows ? &r : nullptr));
      std::copy(l.begin(), l.end(), losses->begin() + static_cast<std::ptrdiff_t>(i));
      if (rows) std::move(r.begin(), r.end(), rows->begin() + static_cast<std::ptrdiff_t>(i));
    }
    RETURN_IF_ERROR(src.status(), "evaluation forward");
  }
  return Status::OK();
}

StatusOr<std::vector<double>> Model::eval_loss_sums(const std::vector<const Batch*>& bs, LayerSource& src) {
  std::vector<float> losses;
  RETURN_IF_ERROR(eval_batches(bs, src, &losses, nullptr));
  return std::vector<double>(losses.begin(), losses.end());
}

// Per batch, its segments' sums of the head rows' log p (as the one-batch eval_sequence_logps).
StatusOr<std::vector<std::vector<double>>> Model::eval_sequence_logps(const std::vector<const Batch*>& bs,
                                                                      LayerSource& src) {
  std::vector<float> losses;
  std::vector<std::vector<double>> rows;
  RETURN_IF_ERROR(eval_batches(bs, src, &losses, &rows));
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < bs.size(); ++i) {
    const Batch& b = *bs[i];
    out.push_back(rows[i].empty() ? std::vector<double>(static_cast<size_t>(segment_count(b)), 0.0)
                                  : sequence_sums(head_row_sequences(b, opts_.head_trained_rows), rows[i],
                                                  segment_count(b)));
  }
  return out;
}

}  // namespace st
