// cuDNN SDPA attention (backend/cuda/attention_cudnn.h) vs the backend's own tensor-core kernels
// and vs the CPU reference: forward (out, lse) and backward (dq, dk, dv) at model-like GQA shapes;
// bitwise run-to-run determinism of forward and backward; packed documents given by doc_ids alone
// keep the own kernels, given as spans they run ragged on cuDNN; a timing printout (no assertion)
// of cuDNN (whole and chunked backward) vs own at T=4096, NH=32, KVH=8, D=128.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/attention_tc.h"
#include "gpu_harness.h"

namespace st::test {
namespace {

struct Case {
  int64_t B, T, NH, KVH, D;
  int64_t window = 0;  // sliding window (0: none)
};

std::string name(const Case& c) {
  return std::string("B") + std::to_string(c.B) + " T" + std::to_string(c.T) + " NH" + std::to_string(c.NH) + " KVH" +
         std::to_string(c.KVH) + " D" + std::to_string(c.D) + (c.window ? " W" + std::to_string(c.window) : "");
}

AttnShape shape_of(const Case& c) {
  return AttnShape{c.NH, c.KVH, c.D, 1.0f / std::sqrt(static_cast<float>(c.D)), c.window};
}

struct AttnRun {
  Twin q, k, v, out, lse, dout, dq, dk, dv;
  AttnRun(const Case& c, std::mt19937& rng)
      : q(DType::kBF16, {c.B * c.T, c.NH, c.D}, rng), k(DType::kBF16, {c.B * c.T, c.KVH, c.D}, rng),
        v(DType::kBF16, {c.B * c.T, c.KVH, c.D}, rng), out(DType::kBF16, {c.B * c.T, c.NH, c.D}, rng, 0.0f),
        lse(DType::kF32, {c.B, c.NH, c.T}, rng, 0.0f), dout(DType::kBF16, {c.B * c.T, c.NH, c.D}, rng),
        dq(DType::kBF16, {c.B * c.T, c.NH, c.D}, rng, 0.0f), dk(DType::kBF16, {c.B * c.T, c.KVH, c.D}, rng, 0.0f),
        dv(DType::kBF16, {c.B * c.T, c.KVH, c.D}, rng, 0.0f) {}
  // Prepares the shape and grants its whole workspace first (backend.h Note [fused attention
  // workspace]; what a plan does), unless `prepare` is false.
  void fwd(const SeqLayout& L, const AttnShape& s, bool prepare = true) {
    if (prepare && L.doc_ids == nullptr)
      gpu_backend().set_fused_attention_allowance(gpu_backend().fused_attention_workspace(L.batch, L.seq, s));
    gpu_backend().attention(out.gpu(), lse.gpu(), q.gpu(), k.gpu(), v.gpu(), L, s);
  }
  void bwd(const SeqLayout& L, const AttnShape& s) {
    gpu_backend().attention_backward(dq.gpu(), dk.gpu(), dv.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(),
                                     lse.gpu(), L, s);
  }
};

struct Outputs {
  std::vector<float> out, lse, dq, dk, dv;
};

// One GPU forward + backward on the cuDNN path (cudnn = true) or the own kernels, proving the route
// by the two paths' call counters.
Outputs pass(AttnRun& r, const SeqLayout& L, const AttnShape& s, bool cudnn) {
  cuda::cudnn_attention_enabled() = cudnn;
  const int64_t c0 = cuda::cudnn_attention_calls(), t0 = cuda::attention_tc_calls();
  r.fwd(L, s);
  r.bwd(L, s);
  cuda::cudnn_attention_enabled() = true;
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, cudnn ? 2 : 0) << "cuDNN path calls";
  EXPECT_EQ(cuda::attention_tc_calls() - t0, cudnn ? 0 : 2) << "own tensor-core path calls";
  return {r.out.gpu_vals(), r.lse.gpu_vals(), r.dq.gpu_vals(), r.dk.gpu_vals(), r.dv.gpu_vals()};
}

// NMSE bound plus a printout of the max abs error and max abs error / max |ref|.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double limit, const std::string& w) {
  EXPECT_TRUE(nmse_ok(got, ref, limit)) << w;
  double max_err = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  std::printf("  %-34s max abs err %.3e  max rel (to max|ref|) %.3e\n", w.c_str(), max_err,
              max_err / std::max(max_ref, 1e-30));
}

TEST(AttentionCudnn, BuiltWithCudnn) {
  // These tests only mean something on a build that found cuDNN and its frontend.
  ASSERT_TRUE(cuda::cudnn_attention_built()) << "configure found no cuDNN frontend / libcudnn";
}

// cuDNN vs the own tensor-core kernels on the same inputs: same convention for lse (natural-log
// logsumexp of the scaled scores), bf16-close outputs and gradients.
TEST(AttentionCudnn, MatchesOwnKernels) {
  std::mt19937 rng(31);
  // The windowed cases pin cuDNN's diagonal band to the own kernels' t - W < j <= t.
  const Case cases[] = {{1, 512, 14, 2, 64},      {2, 256, 16, 2, 128},    {1, 4096, 32, 8, 128},
                        {1, 512, 14, 2, 64, 100}, {2, 256, 16, 2, 128, 1}, {1, 4096, 32, 8, 128, 1024}};
  for (const Case& c : cases) {
    const std::string w = name(c);
    std::printf("%s\n", w.c_str());
    AttnRun r(c, rng);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const AttnShape s = shape_of(c);
    const Outputs own = pass(r, L, s, false);
    const Outputs cd = pass(r, L, s, true);
    expect_close(cd.out, own.out, 1e-4, "out " + w);
    expect_close(cd.lse, own.lse, 1e-10, "lse " + w);
    if (c.window == 1) {
      // One key per query: dq = dk = 0 exactly, both sides hold rounding noise only.
      for (const auto* g : {&cd.dq, &cd.dk, &own.dq, &own.dk})
        for (float x : *g) ASSERT_LE(std::fabs(x), 1e-3f) << w;
    } else {
      expect_close(cd.dq, own.dq, 1e-3, "dq " + w);
      expect_close(cd.dk, own.dk, 1e-3, "dk " + w);
    }
    expect_close(cd.dv, own.dv, 1e-3, "dv " + w);
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
  }
  std::fflush(stdout);
}

// Against the CPU backend (f32 math on the same bf16 inputs); the backward starts from the CPU's
// forward results on both sides, so only backward differences count.
TEST(AttentionCudnn, MatchesCpuReference) {
  std::mt19937 rng(32);
  for (const Case& c : {Case{2, 128, 4, 2, 64}, Case{2, 128, 4, 2, 64, 17}}) {
  const std::string w = name(c);
  AttnRun r(c, rng);
  const SeqLayout L{c.B, c.T, nullptr, nullptr};
  const AttnShape s = shape_of(c);
  cpu_backend().attention(r.out.cpu(), r.lse.cpu(), r.q.cpu(), r.k.cpu(), r.v.cpu(), L, s);
  const int64_t c0 = cuda::cudnn_attention_calls();
  r.fwd(L, s);
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 1) << "forward did not take the cuDNN path";
  EXPECT_TWIN_CLOSE(r.out, 1e-4, "out " + w);
  EXPECT_TWIN_CLOSE(r.lse, 1e-10, "lse " + w);
  r.out.set(r.out.cpu_vals());
  r.lse.set(r.lse.cpu_vals());
  cpu_backend().attention_backward(r.dq.cpu(), r.dk.cpu(), r.dv.cpu(), r.dout.cpu(), r.q.cpu(), r.k.cpu(), r.v.cpu(),
                                   r.out.cpu(), r.lse.cpu(), L, s);
  r.bwd(L, s);
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 2) << "backward did not take the cuDNN path";
  EXPECT_TWIN_CLOSE(r.dq, 5e-4, "dq " + w);
  EXPECT_TWIN_CLOSE(r.dk, 5e-4, "dk " + w);
  EXPECT_TWIN_CLOSE(r.dv, 5e-4, "dv " + w);
  }
}

// Same inputs, same kernels -> same bits, forward and (deterministic-algorithm) backward.
TEST(AttentionCudnn, DeterministicBits) {
  std::mt19937 rng(33);
  const Case cases[] = {{1, 512, 14, 2, 64}, {2, 256, 16, 2, 128}, {1, 4096, 32, 8, 128}};
  for (const Case& c : cases) {
    AttnRun r(c, rng);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const AttnShape s = shape_of(c);
    std::vector<std::vector<uint8_t>> first;
    for (int rep = 0; rep < 2; ++rep) {
      const int64_t c0 = cuda::cudnn_attention_calls();
      r.fwd(L, s);
      r.bwd(L, s);
      EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 2) << name(c);
      std::vector<std::vector<uint8_t>> now;
      for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) now.push_back(t->gpu_bytes());
      if (rep == 0) first = std::move(now);
      else
        for (size_t i = 0; i < now.size(); ++i)
          EXPECT_TRUE(now[i] == first[i]) << name(c) << ": output " << i << " (out, lse, dq, dk, dv) differs";
    }
  }
}

// Documents given by doc_ids alone (no spans) stay on the own kernels.
TEST(AttentionCudnn, DocIdsKeepOwnKernels) {
  std::mt19937 rng(34);
  const Case c{1, 512, 14, 2, 64};
  AttnRun r(c, rng);
  std::vector<int32_t> ids(static_cast<size_t>(c.T));
  for (int64_t t = 0; t < c.T; ++t) ids[t] = static_cast<int32_t>(t / 100);
  TwinI32 docs(ids);
  const SeqLayout L{c.B, c.T, nullptr, docs.gpu()};
  const int64_t c0 = cuda::cudnn_attention_calls(), t0 = cuda::attention_tc_calls();
  r.fwd(L, shape_of(c));
  r.bwd(L, shape_of(c));
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 0);
  EXPECT_EQ(cuda::attention_tc_calls() - t0, 2);
}

// Packed rows given as document spans (backend.h Note [document spans]) run on cuDNN's ragged
// layout (attention_cudnn.cc Note [ragged documents]): the same attention as the own kernels'
// per-token document mask, bf16-close; lse token-major there ([B*T, NH]) against the own
// kernels' [B, NH, T]. Deterministic bits run to run; a sliding window applies inside each span.
struct Spans {
  std::vector<int32_t> ids, starts, lens;
  int64_t spans = 0, slots = 0, max_len = 0;
};
// Rows of T tokens cut into documents of the given lengths (each row's list sums to T).
Spans make_spans(int64_t T, const std::vector<std::vector<int>>& rows) {
  Spans sp;
  int32_t id = 0;
  for (const auto& row : rows) {
    int64_t used = 0;
    for (int len : row) {
      sp.starts.push_back(static_cast<int32_t>(sp.ids.size()));
      sp.lens.push_back(len);
      sp.max_len = std::max<int64_t>(sp.max_len, len);
      for (int i = 0; i < len; ++i) sp.ids.push_back(id);
      ++id;
      used += len;
    }
    EXPECT_EQ(used, T);
  }
  sp.spans = static_cast<int64_t>(sp.lens.size());
  sp.slots = document_slots(sp.spans);
  sp.starts.resize(static_cast<size_t>(sp.slots + 1), static_cast<int32_t>(sp.ids.size()));
  sp.lens.resize(static_cast<size_t>(sp.slots), 0);
  return sp;
}

// The own kernels' layout (doc_ids) with the spans of sp added: cuDNN's ragged layout.
SeqLayout ragged_layout(SeqLayout L, const Spans& sp, const TwinI32& starts, const TwinI32& lens) {
  L.doc_spans = sp.spans;
  L.doc_slots = sp.slots;
  L.max_doc_len = sp.max_len;
  L.doc_starts = starts.gpu();
  L.doc_lens = lens.gpu();
  return L;
}

TEST(AttentionCudnn, RaggedDocumentsMatchOwnKernels) {
  std::mt19937 rng(37);
  struct RaggedCase {
    Case c;
    std::vector<std::vector<int>> rows;
  };
  const RaggedCase cases[] = {
      {{1, 512, 14, 2, 64}, {{100, 60, 96, 256}}},                   // 4 spans
      {{2, 256, 16, 2, 128}, {{1, 255}, {37, 37, 37, 37, 37, 71}}},   // 8 spans, one of 1 token
      {{1, 2048, 16, 2, 128}, {{512, 512, 512, 512}}},               // Qwen2.5-3B, 512-token documents
      {{1, 1000, 8, 8, 64}, {{300, 700}}},                           // T not a power of two
      {{1, 512, 14, 2, 64, 100}, {{200, 312}}},                      // a sliding window inside each span
  };
  gpu_backend().set_fused_attention_allowance(uint64_t{1} << 30);  // what a plan would grant these shapes
  for (const RaggedCase& rc : cases) {
    const Case& c = rc.c;
    const std::string w = name(c) + " (" + std::to_string(rc.rows.size()) + " rows packed)";
    std::printf("%s\n", w.c_str());
    const Spans sp = make_spans(c.T, rc.rows);
    TwinI32 ids(sp.ids), starts(sp.starts), lens(sp.lens);
    AttnRun r(c, rng);
    const AttnShape s = shape_of(c);
    const SeqLayout own_layout{c.B, c.T, nullptr, ids.gpu()};
    const SeqLayout L = ragged_layout(own_layout, sp, starts, lens);
    const Outputs own = pass(r, own_layout, s, false);
    const Outputs cd = pass(r, L, s, true);
    expect_close(cd.out, own.out, 1e-4, "out " + w);
    std::vector<float> lse_t(own.lse.size());  // own [B, NH, T] -> token-major [B*T, NH]
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.NH; ++h)
        for (int64_t t = 0; t < c.T; ++t) lse_t[((b * c.T) + t) * c.NH + h] = own.lse[(b * c.NH + h) * c.T + t];
    expect_close(cd.lse, lse_t, 1e-10, "lse " + w);
    expect_close(cd.dq, own.dq, 1e-3, "dq " + w);
    expect_close(cd.dk, own.dk, 1e-3, "dk " + w);
    expect_close(cd.dv, own.dv, 1e-3, "dv " + w);
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
    // Run to run: the same bits (deterministic backward).
    const Outputs again = pass(r, L, s, true);
    EXPECT_TRUE(again.out == cd.out && again.lse == cd.lse && again.dq == cd.dq && again.dk == cd.dk &&
                again.dv == cd.dv)
        << w << ": a second ragged pass gave other bits";
  }
  gpu_backend().set_fused_attention_allowance(0);
  std::fflush(stdout);
}

// attention_cudnn.cc Note [chunked backward]: with a grant between the chunked and the whole
// workspace, the backward runs in 1024-row query chunks (dK/dV summed in f32); it must match the
// own kernels as closely as the whole cuDNN backward does, and repeat its bits run to run.
// forward = false: the backward alone, from the out / lse already in r.
Outputs chunked_pass(AttnRun& r, const SeqLayout& L, const AttnShape& s, uint64_t allowance, bool forward = true) {
  gpu_backend().set_fused_attention_allowance(allowance);
  const int64_t c0 = cuda::cudnn_attention_calls(), k0 = cuda::cudnn_chunked_backward_calls();
  if (forward) r.fwd(L, s, /*prepare=*/false);
  r.bwd(L, s);
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, forward ? 2 : 1) << "cuDNN path calls";
  EXPECT_EQ(cuda::cudnn_chunked_backward_calls() - k0, 1) << "the backward did not run in chunks";
  gpu_backend().set_fused_attention_allowance(0);
  return {r.out.gpu_vals(), r.lse.gpu_vals(), r.dq.gpu_vals(), r.dk.gpu_vals(), r.dv.gpu_vals()};
}

TEST(AttentionCudnn, ChunkedBackwardMatchesOwnKernels) {
  std::mt19937 rng(43);
  const Case cases[] = {{1, 4096, 32, 8, 128}, {2, 2500, 14, 2, 64}, {1, 3000, 16, 16, 128}, {1, 3000, 8, 2, 64, 700}};
  for (const Case& c : cases) {
    const std::string w = name(c) + " chunked";
    std::printf("%s\n", w.c_str());
    AttnRun r(c, rng);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const AttnShape s = shape_of(c);
    const uint64_t whole = gpu_backend().fused_attention_workspace(c.B, c.T, s);
    const uint64_t chunked = gpu_backend().fused_attention_min_workspace(c.B, c.T, s);
    std::printf("  workspace whole %llu, chunked %llu bytes\n", static_cast<unsigned long long>(whole),
                static_cast<unsigned long long>(chunked));
    ASSERT_GT(chunked, 0u) << w;
    ASSERT_LT(chunked, whole) << w;
    const Outputs own = pass(r, L, s, false);
    const Outputs full = pass(r, L, s, true);
    const Outputs ch = chunked_pass(r, L, s, chunked);
    EXPECT_TRUE(ch.out == full.out && ch.lse == full.lse) << w << ": the forward is the whole one";
    EXPECT_TRUE(ch.dq != full.dq || ch.dk != full.dk) << w << ": chunked and whole gave the same bits -- chunked did not run?";
    for (auto [got, ref, what] : {std::tuple{&ch.dq, &own.dq, "dq"}, std::tuple{&ch.dk, &own.dk, "dk"},
                                  std::tuple{&ch.dv, &own.dv, "dv"}})
      expect_close(*got, *ref, 1e-3, std::string(what) + " " + w + " vs own");
    for (auto [got, ref, what] : {std::tuple{&full.dq, &own.dq, "dq"}, std::tuple{&full.dk, &own.dk, "dk"},
                                  std::tuple{&full.dv, &own.dv, "dv"}})
      expect_close(*got, *ref, 1e-3, std::string(what) + " " + name(c) + " whole vs own");
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
    const Outputs again = chunked_pass(r, L, s, chunked);
    EXPECT_TRUE(again.dq == ch.dq && again.dk == ch.dk && again.dv == ch.dv) << w << ": run to run bits differ";
  }
  std::fflush(stdout);
}

// Note [long sequences]: past T = 46341 a [T, T] index no longer fits in int32, and a [T, heads,
// D] tensor passes 2^31 bytes soon after; long-context users (32k-128k tokens) would see any such
// overflow as silently wrong rows at the end of the sequence. One dense row of 50,000 tokens
// against the CPU reference, the rows past 46,341 also compared on their own (a whole-tensor NMSE
// would dilute a broken tail), and two packed documents of 50,000 + 20,000 tokens on the ragged
// layout against the own kernels.
std::vector<float> tail_rows(const std::vector<float>& v, int64_t first_row, int64_t row_width) {
  return std::vector<float>(v.begin() + first_row * row_width, v.end());
}

TEST(AttentionCudnn, LongSequencesMatch) {
  std::mt19937 rng(41);
  constexpr int64_t kTail = 46341;  // first row whose T x T index passes int32
  {
    const Case c{1, 50000, 2, 1, 64};
    const std::string w = name(c);
    AttnRun r(c, rng);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const AttnShape s = shape_of(c);
    cpu_backend().attention(r.out.cpu(), r.lse.cpu(), r.q.cpu(), r.k.cpu(), r.v.cpu(), L, s);
    const int64_t c0 = cuda::cudnn_attention_calls();
    r.fwd(L, s);
    EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 1) << "forward did not take the cuDNN path";
    expect_close(r.out.gpu_vals(), r.out.cpu_vals(), 1e-4, "out " + w);
    expect_close(tail_rows(r.out.gpu_vals(), kTail, c.NH * c.D), tail_rows(r.out.cpu_vals(), kTail, c.NH * c.D), 1e-4,
                 "out rows >= 46341");
    expect_close(r.lse.gpu_vals(), r.lse.cpu_vals(), 1e-10, "lse " + w);
    r.out.set(r.out.cpu_vals());
    r.lse.set(r.lse.cpu_vals());
    cpu_backend().attention_backward(r.dq.cpu(), r.dk.cpu(), r.dv.cpu(), r.dout.cpu(), r.q.cpu(), r.k.cpu(),
                                     r.v.cpu(), r.out.cpu(), r.lse.cpu(), L, s);
    r.bwd(L, s);
    EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 2) << "backward did not take the cuDNN path";
    for (auto [t, what, width] : {std::tuple{&r.dq, "dq", c.NH * c.D}, std::tuple{&r.dk, "dk", c.KVH * c.D},
                                  std::tuple{&r.dv, "dv", c.KVH * c.D}}) {
      expect_close(t->gpu_vals(), t->cpu_vals(), 5e-4, std::string(what) + " " + w);
      expect_close(tail_rows(t->gpu_vals(), kTail, width), tail_rows(t->cpu_vals(), kTail, width), 5e-4,
                   std::string(what) + " rows >= 46341");
    }
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
    // The same row with the backward in query chunks (Note [chunked backward]): 49 chunks.
    const uint64_t chunked = gpu_backend().fused_attention_min_workspace(c.B, c.T, s);
    ASSERT_GT(chunked, 0u);
    std::printf("  chunked workspace %llu bytes (whole: %llu)\n", static_cast<unsigned long long>(chunked),
                static_cast<unsigned long long>(gpu_backend().fused_attention_workspace(c.B, c.T, s)));
    chunked_pass(r, L, s, chunked, /*forward=*/false);  // from the CPU's out and lse, as above
    for (auto [t, what, width] : {std::tuple{&r.dq, "dq", c.NH * c.D}, std::tuple{&r.dk, "dk", c.KVH * c.D},
                                  std::tuple{&r.dv, "dv", c.KVH * c.D}}) {
      expect_close(t->gpu_vals(), t->cpu_vals(), 5e-4, std::string(what) + " " + w + " chunked");
      expect_close(tail_rows(t->gpu_vals(), kTail, width), tail_rows(t->cpu_vals(), kTail, width), 5e-4,
                   std::string(what) + " chunked rows >= 46341");
    }
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
  }
  {
    const Case c{1, 70000, 2, 1, 64};
    const std::string w = name(c) + " (documents of 50000 + 20000)";
    const Spans sp = make_spans(c.T, {{50000, 20000}});
    TwinI32 ids(sp.ids), starts(sp.starts), lens(sp.lens);
    AttnRun r(c, rng);
    const AttnShape s = shape_of(c);
    const SeqLayout own_layout{c.B, c.T, nullptr, ids.gpu()};
    const SeqLayout L = ragged_layout(own_layout, sp, starts, lens);
    // cuDNN's deterministic backward takes ~2 bytes per (head, query, key) of a span slot: 20 GB here
    // (call 1 of session 12), which the H200 grants; a smaller card keeps the own kernels.
    gpu_backend().set_fused_attention_allowance(uint64_t{24} << 30);
    const Outputs own = pass(r, own_layout, s, false);
    const Outputs cd = pass(r, L, s, true);
    gpu_backend().set_fused_attention_allowance(0);
    expect_close(cd.out, own.out, 1e-4, "out " + w);
    expect_close(cd.dq, own.dq, 1e-3, "dq " + w);
    expect_close(cd.dk, own.dk, 1e-3, "dk " + w);
    expect_close(cd.dv, own.dv, 1e-3, "dv " + w);
    expect_close(tail_rows(cd.dq, kTail, c.NH * c.D), tail_rows(own.dq, kTail, c.NH * c.D), 1e-3, "dq rows >= 46341");
    for (Twin* t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) EXPECT_TRUE(t->guards_ok()) << w;
  }
  std::fflush(stdout);
}

// Shapes are prepared on first sight, and take cuDNN only within the granted allowance (the plan's
// choice).
TEST(AttentionCudnn, PreparedShapesAndAllowance) {
  std::mt19937 rng(36);
  cuda::cudnn_attention_enabled() = true;
  Backend& g = gpu_backend();
  g.set_fused_attention_allowance(0);
  {  // a shape seen first in a call is prepared there (padded batches bring new lengths) and runs
     // on cuDNN when its workspace fits the default allowance
    const Case c{1, 384, 14, 2, 64};
    AttnRun r(c, rng);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const int64_t c0 = cuda::cudnn_attention_calls();
    r.fwd(L, shape_of(c), /*prepare=*/false);
    r.bwd(L, shape_of(c));
    EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 2) << "a shape seen first in a call did not run on cuDNN";
  }
  const Case c{1, 4096, 32, 8, 128};
  AttnRun r(c, rng);
  const SeqLayout L{c.B, c.T, nullptr, nullptr};
  const uint64_t ws = g.fused_attention_workspace(L.batch, L.seq, shape_of(c));
  ASSERT_GT(ws, 0u) << "cuDNN has no path for " << name(c);
  std::printf("  %s: cuDNN workspace %llu bytes\n", name(c).c_str(), static_cast<unsigned long long>(ws));
  g.set_fused_attention_allowance(0);  // the default allowance (scratch + 32 MiB) is far below 1 GB
  int64_t c0 = cuda::cudnn_attention_calls();
  r.fwd(L, shape_of(c), /*prepare=*/false);
  r.bwd(L, shape_of(c));
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 0) << "ran on cuDNN past the allowance";
  g.set_fused_attention_allowance(ws);
  c0 = cuda::cudnn_attention_calls();
  r.fwd(L, shape_of(c), /*prepare=*/false);
  r.bwd(L, shape_of(c));
  EXPECT_EQ(cuda::cudnn_attention_calls() - c0, 2) << "did not run on cuDNN with its workspace granted";
  g.set_fused_attention_allowance(0);
}

// The shapes TimingPrintout times: STREAMTUNE_ATTN_TIMING="B,T,NH,KVH,D;..." (experiments), else
// Llama-3-8B's at 4096 tokens.
std::vector<Case> timing_cases() {
  std::vector<Case> out;
  if (const char* e = std::getenv("STREAMTUNE_ATTN_TIMING")) {
    std::string s = e;
    for (size_t at = 0; at < s.size();) {
      size_t end = s.find(';', at);
      if (end == std::string::npos) end = s.size();
      long long b, t, nh, kvh, d;
      if (std::sscanf(s.substr(at, end - at).c_str(), "%lld,%lld,%lld,%lld,%lld", &b, &t, &nh, &kvh, &d) == 5)
        out.push_back(Case{b, t, nh, kvh, d});
      at = end + 1;
    }
  }
  if (out.empty()) out.push_back(Case{1, 4096, 32, 8, 128});
  return out;
}

// Printout only (causal FLOPs: fwd 2·B·NH·T²·D, bwd 2.5x fwd).
void time_case(const Case& c) {
  std::mt19937 rng(35);
  AttnRun r(c, rng);
  const SeqLayout L{c.B, c.T, nullptr, nullptr};
  const AttnShape s = shape_of(c);
  const double flops = 2.0 * c.B * c.NH * static_cast<double>(c.T) * c.T * c.D;
  std::printf("%-6s %9s %9s %9s %9s   (%s)\n", "path", "fwd ms", "fwd TF/s", "bwd ms", "bwd TF/s", name(c).c_str());
  for (bool cudnn : {false, true}) {
    cuda::cudnn_attention_enabled() = cudnn;
    r.fwd(L, s);  // out/lse of this path for its backward
    const double f = time_ms(10, [&] { r.fwd(L, s); });
    const double b = time_ms(10, [&] { r.bwd(L, s); });
    std::printf("%-6s %9.3f %9.1f %9.3f %9.1f\n", cudnn ? "cudnn" : "own", f, flops / (f * 1e9), b,
                2.5 * flops / (b * 1e9));
    EXPECT_TRUE(std::isfinite(f) && std::isfinite(b));
  }
  cuda::cudnn_attention_enabled() = true;
  // The backward in query chunks (Note [chunked backward]) when the shape has more than one chunk.
  const uint64_t whole = gpu_backend().fused_attention_workspace(c.B, c.T, s);
  const uint64_t chunked = gpu_backend().fused_attention_min_workspace(c.B, c.T, s);
  if (chunked > 0 && chunked < whole) {
    r.fwd(L, s);
    gpu_backend().set_fused_attention_allowance(chunked);
    const double b = time_ms(10, [&] { r.bwd(L, s); });
    std::printf("%-6s %9s %9s %9.3f %9.1f   (workspace %.1f MiB chunked, %.1f MiB whole)\n", "chunkd", "", "", b,
                2.5 * flops / (b * 1e9), chunked / 1048576.0, whole / 1048576.0);
    gpu_backend().set_fused_attention_allowance(0);
    EXPECT_TRUE(std::isfinite(b));
  }
  std::fflush(stdout);
}

TEST(AttentionCudnn, TimingPrintout) {
  for (const Case& c : timing_cases()) time_case(c);
}

}  // namespace
}  // namespace st::test
