// Note [bit-preserving GEMM tuning]: cuBLASLt's heuristic returns a ranked list of algorithms; its
// first choice is not always the fastest for our shapes. Different algorithms may sum K in a
// different order (split-K, stream-K), which changes the bits, and streamtune's runs must give the
// same bits every time (streamed == resident, run == rerun). So a candidate is eligible only if,
// on the GEMM's real operands, its output equals the first choice's output bit for bit; among the
// eligible ones the fastest (min of a few timed runs) is kept for the shape. Equal bits on a whole
// real product (millions of outputs, each a K-long f32 sum) is what a different summation order
// cannot produce except by accident; the first choice always stays eligible, so the result is at
// worst the heuristic's.
//
// Tuning runs once per GEMM shape, at its first eager call (never while a stream is being
// captured), into scratch memory allocated for the probe and freed after, only when the device has
// room for it; otherwise the shape keeps the first choice.
//
// Measured (bench/RESULTS.md session 8 call 1): on the H200 every one of the top-8 candidates gave
// the first choice's bits, and the first choice was the fastest or within 2-7% on single shapes;
// whole steps moved -1.3% to +2.0%, inside the spread of a call. So tuning is OFF by default (it
// costs a probe per shape at start-up for no measured gain); STREAMTUNE_GEMM_TUNE=on enables it,
// =log also prints each shape's candidates (the gputest uses it). Kept for other GPUs and cuBLASLt
// versions, where the first choice may be further off.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace st::cuda {

// One matmul exactly as GemmRunner issues it (cuBLASLt's operand order); D goes to scratch.
struct TuneCall {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  const void* alpha;
  const void* a;     // Lt's A
  const void* b;     // Lt's B
  const void* beta;
  const void* c_in;  // Lt's C (read when beta != 0)
  size_t d_bytes;    // bytes D spans (a pair's second product included)
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;
  double flops;      // for the log
  const char* what;  // shape, for the log
};

enum class TuneMode { kOff, kOn, kLog };
TuneMode gemm_tune_mode();  // from STREAMTUNE_GEMM_TUNE (default off)

// Index into `cands` of the algorithm to keep (0 when tuning cannot run).
int pick_algo(const TuneCall& call, const cublasLtMatmulAlgo_t* cands, int num_cands, TuneMode mode);

}  // namespace st::cuda
