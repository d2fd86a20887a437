// Causal, same-document GQA attention (with an optional sliding window), materialising one score
// row at a time.
//
// Forward: one work item per query row (b, h, t). Backward, without atomics (or, when there are
// at least as many (b, kv-head) groups as threads, the same sums fused into one pass per group):
//   pass 0, per (b, h, t):  Dt = rowsum(dO * O)
//   pass 1, per (b, h, t):  dq_t = scale * sum_j dS_tj k_j
//   pass 2, per (b, g, j):  dk_j = scale * sum_{h in group g} sum_t dS_tj q_t ;  dv_j = sum P_tj dO_t
// with P_tj = exp(s_tj - lse_t), dS_tj = P_tj (dO_t . v_j - Dt). Each item is one thread's
// fixed-order loop, so the bits do not depend on the thread count or schedule. Dot products and
// accumulators are double; the score s_tj is rounded to f32 exactly as in the forward.
#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {
namespace {

// Dot product: f32 products summed in 8 independent f32 lanes, combined in a fixed tree. The
// lanes vectorise without reassociation, so the bits do not depend on vector width or threads;
// D is short (<= 256), so f32 lanes lose nothing that matters next to bf16 storage.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

struct Attn {
  int64_t B, T, NH, KVH, D, group;
  float scale;
  int64_t window;      // sliding window (AttnShape::window); 0 = none
  const int32_t* doc;  // [B*T] or null
  const float* q;      // [B*T, NH, D]
  const float* k;      // [B*T, KVH, D]
  const float* v;

  int64_t qi(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * NH + h) * D; }
  int64_t ki(int64_t b, int64_t j, int64_t g) const { return ((b * T + j) * KVH + g) * D; }
  bool allowed(int64_t b, int64_t t, int64_t j) const {
    return j <= t && (window == 0 || t - j < window) && (doc == nullptr || doc[b * T + j] == doc[b * T + t]);
  }
  float score(int64_t b, int64_t h, int64_t t, int64_t j) const {
    return dot(q + qi(b, t, h), k + ki(b, j, h / group), D) * scale;
  }
};

void check_attn(const Tensor& q, const Tensor& k, const Tensor& v, const SeqLayout& L, const AttnShape& s) {
  check_float(q, "attention q");
  check_float(k, "attention k");
  check_float(v, "attention v");
  CHECK(s.num_heads > 0 && s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0 && s.head_dim > 0,
        "attention: NH " << s.num_heads << " KVH " << s.num_kv_heads << " D " << s.head_dim);
  const int64_t tok = L.batch * L.seq;
  CHECK(q.numel() == tok * s.num_heads * s.head_dim, "attention q " << shape_of(q));
  CHECK(k.numel() == tok * s.num_kv_heads * s.head_dim, "attention k " << shape_of(k));
  CHECK(v.numel() == k.numel(), "attention v " << shape_of(v));
}

Attn make_attn(const F32View& q, const F32View& k, const F32View& v, const SeqLayout& L, const AttnShape& s) {
  return Attn{L.batch, L.seq, s.num_heads, s.num_kv_heads, s.head_dim, s.num_heads / s.num_kv_heads,
              s.scale, effective_window(s, L.seq), L.doc_ids, q.data(), k.data(), v.data()};
}

}  // namespace

void attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s) {
  check_attn(q, k, v, L, s);
  check_float(out, "attention out");
  CHECK(out.numel() == q.numel(), "attention out " << shape_of(out));
  CHECK(lse.dtype == DType::kF32 && lse.numel() == L.batch * s.num_heads * L.seq, "attention lse " << shape_of(lse));
  F32View qv(q), kv(k), vv(v);
  const Attn a = make_attn(qv, kv, vv, L, s);
  const int64_t items = a.B * a.NH * a.T, D = a.D;
#pragma omp parallel
  {
    std::vector<float> sc(static_cast<size_t>(a.T));
    std::vector<double> acc(static_cast<size_t>(D));
    std::vector<float> orow(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t t = it % a.T, h = (it / a.T) % a.NH, b = it / (a.T * a.NH);
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j <= t; ++j) {
        sc[j] = a.allowed(b, t, j) ? a.score(b, h, t, j) : -std::numeric_limits<float>::infinity();
        m = std::max(m, sc[j]);
      }
      double l = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= t; ++j) {
        if (!a.allowed(b, t, j)) continue;
        const double p = std::exp(static_cast<double>(sc[j]) - m);
        l += p;
        const float* vr = a.v + a.ki(b, j, h / a.group);
        for (int64_t d = 0; d < D; ++d) acc[d] += p * vr[d];
      }
      for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<float>(acc[d] / l);
      store_f32(out, a.qi(b, t, h), D, orow.data());
      lse.ptr<float>()[(b * a.NH + h) * a.T + t] = static_cast<float>(m + std::log(l));
    }
  }
}

void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out,
                        Tensor lse, const SeqLayout& L, const AttnShape& s) {
  check_attn(q, k, v, L, s);
  for (const Tensor* t : {&dq, &dout, &out}) {
    check_float(*t, "attention_backward");
    CHECK(t->numel() == q.numel(), "attention_backward: " << shape_of(*t) << " vs q " << shape_of(q));
  }
  for (const Tensor* t : {&dk, &dv}) {
    check_float(*t, "attention_backward");
    CHECK(t->numel() == k.numel(), "attention_backward: " << shape_of(*t) << " vs k " << shape_of(k));
  }
  CHECK(lse.dtype == DType::kF32 && lse.numel() == L.batch * s.num_heads * L.seq, "attention lse " << shape_of(lse));
  F32View qv(q), kv(k), vv(v), dov(dout), ov(out);
  const Attn a = make_attn(qv, kv, vv, L, s);
  const float* dO = dov.data();
  const float* LSE = lse.ptr<const float>();
  const int64_t rows = a.B * a.NH * a.T, D = a.D;
  auto row_of = [&](int64_t it, int64_t* b, int64_t* h, int64_t* t) {
    *t = it % a.T, *h = (it / a.T) % a.NH, *b = it / (a.T * a.NH);
  };
  // Dt indexed like lse: [B, NH, T].
  std::vector<double> Dt(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static)
  for (int64_t it = 0; it < rows; ++it) {
    int64_t b, h, t;
    row_of(it, &b, &h, &t);
    Dt[(b * a.NH + h) * a.T + t] = dot(dO + a.qi(b, t, h), ov.data() + a.qi(b, t, h), D);
  }
  auto ds_of = [&](int64_t b, int64_t h, int64_t t, int64_t j, double* p_out) {
    const int64_t li = (b * a.NH + h) * a.T + t;
    const double p = std::exp(static_cast<double>(a.score(b, h, t, j)) - LSE[li]);
    *p_out = p;
    return p * (dot(dO + a.qi(b, t, h), a.v + a.ki(b, j, h / a.group), D) - Dt[li]);
  };
  if (a.B * a.KVH >= omp_get_max_threads()) {
    // Enough (b, g) items for every thread: one fused pass, each dS computed once. The sums run
    // in exactly the order of the two-pass path below, so both give the same bits.
#pragma omp parallel
    {
      std::vector<double> acc(static_cast<size_t>(D)), acck(static_cast<size_t>(a.T * D)),
          accv(static_cast<size_t>(a.T * D));
      std::vector<float> row(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < a.B * a.KVH; ++it) {
        const int64_t g = it % a.KVH, b = it / a.KVH;
        std::fill(acck.begin(), acck.end(), 0.0);
        std::fill(accv.begin(), accv.end(), 0.0);
        for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
          for (int64_t t = 0; t < a.T; ++t) {
            const float* qr = a.q + a.qi(b, t, h);
            const float* gr = dO + a.qi(b, t, h);
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j <= t; ++j) {
              if (!a.allowed(b, t, j)) continue;
              double p;
              const double ds = ds_of(b, h, t, j, &p);
              const float* kr = a.k + a.ki(b, j, g);
              double* dkj = acck.data() + j * D;
              double* dvj = accv.data() + j * D;
              for (int64_t d = 0; d < D; ++d) {
                acc[d] += ds * kr[d];
                dkj[d] += ds * qr[d];
                dvj[d] += p * gr[d];
              }
            }
            for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(acc[d] * a.scale);
            store_f32(dq, a.qi(b, t, h), D, row.data());
          }
        }
        for (int64_t j = 0; j < a.T; ++j) {
          for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(acck[j * D + d] * a.scale);
          store_f32(dk, a.ki(b, j, g), D, row.data());
          for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(accv[j * D + d]);
          store_f32(dv, a.ki(b, j, g), D, row.data());
        }
      }
    }
    return;
  }
  // Otherwise two passes that parallelise over query rows, then over keys (dS computed twice).
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<size_t>(D));
    std::vector<float> row(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
    for (int64_t it = 0; it < rows; ++it) {
      int64_t b, h, t;
      row_of(it, &b, &h, &t);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= t; ++j) {
        if (!a.allowed(b, t, j)) continue;
        double p;
        const double ds = ds_of(b, h, t, j, &p);
        const float* kr = a.k + a.ki(b, j, h / a.group);
        for (int64_t d = 0; d < D; ++d) acc[d] += ds * kr[d];
      }
      for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(acc[d] * a.scale);
      store_f32(dq, a.qi(b, t, h), D, row.data());
    }
  }
  const int64_t kv_rows = a.B * a.KVH * a.T;
#pragma omp parallel
  {
    std::vector<double> acck(static_cast<size_t>(D)), accv(static_cast<size_t>(D));
    std::vector<float> row(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
    for (int64_t it = 0; it < kv_rows; ++it) {
      const int64_t j = it % a.T, g = (it / a.T) % a.KVH, b = it / (a.T * a.KVH);
      std::fill(acck.begin(), acck.end(), 0.0);
      std::fill(accv.begin(), accv.end(), 0.0);
      for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
        for (int64_t t = j; t < a.T; ++t) {
          if (!a.allowed(b, t, j)) continue;
          double p;
          const double ds = ds_of(b, h, t, j, &p);
          const float* qr = a.q + a.qi(b, t, h);
          const float* gr = dO + a.qi(b, t, h);
          for (int64_t d = 0; d < D; ++d) {
            acck[d] += ds * qr[d];
            accv[d] += p * gr[d];
          }
        }
      }
      for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(acck[d] * a.scale);
      store_f32(dk, a.ki(b, j, g), D, row.data());
      for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(accv[d]);
      store_f32(dv, a.ki(b, j, g), D, row.data());
    }
  }
}

}  // namespace st::cpu
