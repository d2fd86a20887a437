// Bit-preserving cuBLASLt algorithm choice (gemm_tune.h Note [bit-preserving GEMM tuning]).
#include "backend/cuda/gemm_tune.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"

namespace st::cuda {

namespace {

constexpr int kTimedRuns = 3;
constexpr size_t kMarginBytes = size_t{256} << 20;  // left free beside the probe's scratch

// Counts the 32-bit words (and tail bytes) in which x and y differ.
__global__ void count_diff_kernel(const uint32_t* x, const uint32_t* y, size_t words, const uint8_t* xt,
                                  const uint8_t* yt, int tail, unsigned long long* out) {
  unsigned long long n = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words; i += size_t{gridDim.x} * blockDim.x)
    n += x[i] != y[i];
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int i = 0; i < tail; ++i) n += xt[i] != yt[i];
  if (n) atomicAdd(out, n);
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

TuneMode gemm_tune_mode() {
  static const TuneMode mode = [] {
    const char* e = std::getenv("STREAMTUNE_GEMM_TUNE");
    if (e == nullptr || std::strcmp(e, "off") == 0) return TuneMode::kOff;
    if (std::strcmp(e, "on") == 0) {
      std::fprintf(stderr, "streamtune: STREAMTUNE_GEMM_TUNE=on: GEMM algorithms tuned per shape (same bits)\n");
      return TuneMode::kOn;
    }
    if (std::strcmp(e, "log") == 0) return TuneMode::kLog;
    std::fprintf(stderr, "streamtune: STREAMTUNE_GEMM_TUNE=%s is not on|off|log; tuning stays off\n", e);
    return TuneMode::kOff;
  }();
  return mode;
}

int pick_algo(const TuneCall& call, const cublasLtMatmulAlgo_t* cands, int num_cands, TuneMode mode) {
  if (mode == TuneMode::kOff || num_cands < 2) return 0;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(call.stream, &cs));
  if (cs != cudaStreamCaptureStatusNone) return 0;
  const size_t span = round_up(call.d_bytes, 256);
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 2 * span + 256 + kMarginBytes) return 0;
  void* buf = nullptr;
  if (cudaMalloc(&buf, 2 * span + 256) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  char* d0 = static_cast<char*>(buf);
  char* d1 = d0 + span;
  auto* diff = reinterpret_cast<unsigned long long*>(d1 + span);
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  auto run = [&](const cublasLtMatmulAlgo_t& algo, void* d) {
    return cublasLtMatmul(call.handle, call.desc, call.alpha, call.a, call.la, call.b, call.lb, call.beta, call.c_in,
                          call.lc, d, call.lc, &algo, call.workspace, call.workspace_bytes, call.stream);
  };
  auto time_runs = [&](const cublasLtMatmulAlgo_t& algo, void* d) {
    CUDA_CHECK(cudaEventRecord(e0, call.stream));
    for (int r = 0; r < kTimedRuns; ++r) CUBLAS_CHECK(run(algo, d));
    CUDA_CHECK(cudaEventRecord(e1, call.stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / kTimedRuns;
  };
  int best = 0;
  float best_ms = -1;
  if (run(cands[0], d0) == CUBLAS_STATUS_SUCCESS) {
    best_ms = time_runs(cands[0], d0);
    if (mode == TuneMode::kLog)
      std::fprintf(stderr, "gemm tune %s: #0 %.1f us (%.0f TF/s)\n", call.what, best_ms * 1e3,
                   call.flops / (best_ms * 1e-3) / 1e12);
    const size_t words = call.d_bytes / 4;
    const int tail = static_cast<int>(call.d_bytes % 4);
    for (int i = 1; i < num_cands; ++i) {
      if (run(cands[i], d1) != CUBLAS_STATUS_SUCCESS) continue;
      CUDA_CHECK(cudaMemsetAsync(diff, 0, sizeof(*diff), call.stream));
      count_diff_kernel<<<264, 256, 0, call.stream>>>(reinterpret_cast<const uint32_t*>(d0),
                                                      reinterpret_cast<const uint32_t*>(d1), words,
                                                      reinterpret_cast<const uint8_t*>(d0) + words * 4,
                                                      reinterpret_cast<const uint8_t*>(d1) + words * 4, tail, diff);
      CUDA_CHECK_LAUNCH();
      unsigned long long ndiff = 0;
      CUDA_CHECK(cudaMemcpyAsync(&ndiff, diff, sizeof(ndiff), cudaMemcpyDeviceToHost, call.stream));
      CUDA_CHECK(cudaStreamSynchronize(call.stream));
      const float ms = ndiff == 0 ? time_runs(cands[i], d1) : -1;
      if (mode == TuneMode::kLog) {
        if (ndiff == 0)
          std::fprintf(stderr, "gemm tune %s: #%d %.1f us (%.0f TF/s) same bits\n", call.what, i, ms * 1e3,
                       call.flops / (ms * 1e-3) / 1e12);
        else
          std::fprintf(stderr, "gemm tune %s: #%d differs in %llu words: not eligible\n", call.what, i, ndiff);
      }
      if (ndiff == 0 && ms < best_ms) {
        best = i;
        best_ms = ms;
      }
    }
  } else {
    (void)cudaGetLastError();
  }
  if (mode == TuneMode::kLog) std::fprintf(stderr, "gemm tune %s: keep #%d\n", call.what, best);
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaStreamSynchronize(call.stream));
  CUDA_CHECK(cudaFree(buf));
  return best;
}

}  // namespace st::cuda
