// Row-major GEMM through cuBLASLt. cuBLASLt is column-major, and a row-major [R,C] matrix is the
// column-major [C,R] matrix with the same bytes, so C = op(A)·op(B) is computed as the
// column-major C^T = op(B)^T · op(A)^T: B goes in cuBLASLt's "A" slot and A in its "B" slot.
#include "backend/cuda/gemm.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_tune.h"
#include "backend/cuda/ops.h"
#include "core/check.h"

namespace st::cuda {

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kCandidates = 8;               // heuristic results kept for tuning
constexpr double kTuneMinMacs = double(1u << 31);  // smaller products keep the first choice

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Largest power of two <= 256 dividing the address: the alignment cuBLASLt may assume.
int align_class(const void* p) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && (u % a) != 0) a >>= 1;
  return a;
}
}  // namespace

struct GemmRunner::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulAlgo_t cands[kCandidates];  // the heuristic's ranked list; algo is one of them
  int num_cands = 0;
  bool tuned = false;                       // Note [bit-preserving GEMM tuning] (gemm_tune.h)
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

GemmRunner::GemmRunner(bool tune) : tune_(tune) {
  cublasLtHandle_t h;
  CUBLAS_CHECK(cublasLtCreate(&h));
  handle_ = h;
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
}

GemmRunner::~GemmRunner() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

GemmRunner::Plan& GemmRunner::plan_for(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  const auto [M, N, K, ta, tb, abt_i, ct_i, beta_nz, align, bias, sb, sc, sbias] = key;
  const cudaDataType_t abt = cuda_type(static_cast<DType>(abt_i)), ct = cuda_type(static_cast<DType>(ct_i));
  auto p = std::make_unique<Plan>();
  // f32 inputs use plain f32 compute (no TF32) so f32 runs match the CPU reference closely.
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Lt's A is our B; Lt's B is our A (see the file comment).
  const cublasOperation_t op_a = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (bias) {
    // Lt's D is our C transposed: its rows are our columns, so a per-row Lt bias is our bias[N].
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = ct;  // same dtype as C (GemmRunner::run checks)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof(bias_type)));
  }
  // Stored shapes (column-major view): B row-major [K,N] (or [N,K] when transposed).
  if (tb) CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, abt, K, N, K));
  else    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, abt, N, K, N));
  if (ta) CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, abt, M, K, M));
  else    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, abt, K, M, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, ct, N, M, N));
  if (sb != 0 || sc != 0) {  // run_pair: two products, A shared (stride 0 in Lt's B slot)
    const int32_t two = 2;
    const int64_t zero = 0;
    for (auto* l : {p->la, p->lb, p->lc})
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof(two)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p->la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof(sb)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &zero,
                                                  sizeof(zero)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof(sc)));
    if (bias)
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sbias,
                                                  sizeof(sbias)));
  }

  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = workspace_bytes_;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al = static_cast<uint32_t>(align);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al)));
  cublasLtMatmulHeuristicResult_t res[kCandidates]{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->la, p->lb, p->lc,
                                              p->lc, pref, kCandidates, res, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  CHECK(found > 0, "cuBLASLt found no algorithm for gemm M=" << M << " N=" << N << " K=" << K << " beta="
                                                             << beta_nz << " align=" << align);
  for (int i = 0; i < found; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS) p->cands[p->num_cands++] = res[i].algo;
  CHECK(p->num_cands > 0, "cuBLASLt found no usable algorithm for gemm M=" << M << " N=" << N << " K=" << K);
  p->algo = p->cands[0];
  return *plans_.emplace(key, std::move(p)).first->second;
}

void GemmRunner::matmul(void* c, DType ct, const void* a, const void* b, DType abt, int64_t M, int64_t N, int64_t K,
                        const GemmOpts& o, cudaStream_t s, const void* c_in, Pair pair) {
  // c_in: Lt's C (the addend when beta = 1); D is always c.
  if (c_in == nullptr) c_in = c;
  const float beta = o.accum == Accum::kAdd || c_in != c ? 1.0f : 0.0f;
  const bool bias = !o.bias.empty();
  int align = std::min({align_class(a), align_class(b), align_class(c), align_class(c_in)});
  if (bias) align = std::min(align, align_class(o.bias.data));
  if (pair.sb != 0 || pair.sc != 0) {  // the second product's operands
    align = std::min({align, align_class(static_cast<const char*>(b) + pair.sb * dtype_size(abt)),
                      align_class(static_cast<const char*>(c) + pair.sc * dtype_size(ct))});
    if (bias)
      align = std::min(align, align_class(static_cast<const char*>(o.bias.data) + pair.sbias * dtype_size(o.bias.dtype)));
  }
  const Key key{M, N, K, o.trans_a == Trans::kYes, o.trans_b == Trans::kYes, static_cast<int>(abt),
                static_cast<int>(ct), beta != 0.0f, align, bias, pair.sb, pair.sc, pair.sbias};
  Plan& p = plan_for(key);
  if (bias) {
    const void* bp = o.bias.data;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  if (!p.tuned) tune(p, key, ct, a, b, o.alpha, beta, c_in, s);
  CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &o.alpha, b, p.la, a, p.lb, &beta, c_in,
                              p.lc, c, p.lc, &p.algo, workspace_, workspace_bytes_, s));
}

// Picks the plan's algorithm on this call's operands (gemm_tune.h Note [bit-preserving GEMM
// tuning]); a call inside a stream capture leaves the plan untuned for a later eager call.
void GemmRunner::tune(Plan& p, const Key& key, DType ct, const void* a, const void* b, float alpha, float beta,
                      const void* c_in, cudaStream_t s) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
  if (cs != cudaStreamCaptureStatusNone) return;
  p.tuned = true;
  const TuneMode mode = gemm_tune_mode();
  const int64_t M = std::get<0>(key), N = std::get<1>(key), K = std::get<2>(key), sc = std::get<11>(key);
  const bool ta = std::get<3>(key) != 0, tb = std::get<4>(key) != 0, beta_nz = std::get<7>(key) != 0;
  const int batch = std::get<10>(key) != 0 || sc != 0 ? 2 : 1;
  const double macs = double(M) * double(N) * double(K) * batch;
  if (!tune_ || mode == TuneMode::kOff || p.num_cands < 2 || macs < kTuneMinMacs) return;
  char what[160];
  std::snprintf(what, sizeof what, "M=%lld N=%lld K=%lld%s%s%s%s", static_cast<long long>(M),
                static_cast<long long>(N), static_cast<long long>(K), ta ? " At" : "", tb ? " Bt" : "",
                beta_nz ? " beta=1" : "", batch == 2 ? " pair" : "");
  const TuneCall call{static_cast<cublasLtHandle_t>(handle_), p.desc, p.la, p.lb, p.lc, &alpha, b, a, &beta, c_in,
                      static_cast<size_t>(sc + M * N) * dtype_size(ct), workspace_, workspace_bytes_, s,
                      2.0 * macs, what};
  p.algo = p.cands[pick_algo(call, p.cands, p.num_cands, mode)];
}

void GemmRunner::run(Tensor c, Tensor a, Tensor b, const GemmOpts& o, cudaStream_t s, float* tmp_f32,
                     size_t tmp_elems) {
  const bool ta = o.trans_a == Trans::kYes, tb = o.trans_b == Trans::kYes;
  const int64_t M = ta ? a.cols() : a.rows(), K = ta ? a.rows() : a.cols();
  const int64_t N = tb ? b.rows() : b.cols();
  if (M == 0 || N == 0) return;
  if (K == 0) {  // empty sum: C = 0, the residual, or unchanged when accumulating
    if (!o.residual.empty() && o.residual.data != c.data)
      CUDA_CHECK(cudaMemcpyAsync(c.data, o.residual.data, c.bytes(), cudaMemcpyDeviceToDevice, s));
    else if (o.residual.empty() && o.accum == Accum::kOverwrite)
      CUDA_CHECK(cudaMemsetAsync(c.data, 0, c.bytes(), s));
    return;
  }
  if (!o.bias.empty()) CHECK(o.bias.numel() == N, "gemm: bias has " << o.bias.numel() << " elements, C has " << N);
  const void* c_in = c.data;  // the addend of beta = 1
  GemmOpts oo = o;
  if (!o.residual.empty()) {
    CHECK(o.accum == Accum::kOverwrite && o.residual.dtype == c.dtype && o.residual.rows() == M &&
              o.residual.cols() == N,
          "gemm: residual must be [M,N] in C's dtype, without Accum::kAdd");
    c_in = o.residual.data;
    oo.accum = Accum::kAdd;  // beta = 1 with C = residual, D = c
    oo.residual = Tensor();
  }
  if (a.dtype == DType::kF32 && c.dtype != DType::kF32) {
    // No f32 x f32 -> bf16 kernel in cuBLASLt: compute into f32 scratch, then round once.
    CHECK(tmp_elems >= static_cast<size_t>(M * N), "gemm scratch too small");
    Tensor t(tmp_f32, DType::kF32, {M, N});
    if (oo.accum == Accum::kAdd) launch_convert(t, Tensor(const_cast<void*>(c_in), c.dtype, {M, N}), s);
    GemmOpts plain = oo;
    plain.bias = Tensor();
    matmul(tmp_f32, DType::kF32, a.data, b.data, a.dtype, M, N, K, plain, s);
    if (!o.bias.empty()) launch_add_bias(t, o.bias, s);
    launch_convert(c, t, s);
    return;
  }
  if (!o.bias.empty() && o.bias.dtype != c.dtype) {  // the epilogue wants the bias in C's dtype
    GemmOpts plain = oo;
    plain.bias = Tensor();
    matmul(c.data, c.dtype, a.data, b.data, a.dtype, M, N, K, plain, s, c_in);
    launch_add_bias(c, o.bias, s);
    return;
  }
  matmul(c.data, c.dtype, a.data, b.data, a.dtype, M, N, K, oo, s, c_in);
}

void GemmRunner::run_pair(Tensor c0, Tensor a, Tensor b0, Tensor bias0, int64_t sb, int64_t sc, int64_t sbias,
                          cudaStream_t s) {
  const int64_t M = a.rows(), K = a.cols(), N = b0.rows();
  if (M == 0 || N == 0) return;
  GemmOpts o;
  o.trans_b = Trans::kYes;
  o.bias = bias0;
  matmul(c0.data, c0.dtype, a.data, b0.data, a.dtype, M, N, K, o, s, nullptr, Pair{sb, sc, sbias});
}

}  // namespace st::cuda
