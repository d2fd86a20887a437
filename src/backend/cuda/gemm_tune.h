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
// room for it; otherwise the shape keeps the first choice. STREAMTUNE_GEMM_TUNE=off disables it,
// =log prints each shape's candidates.
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
TuneMode gemm_tune_mode();  // from STREAMTUNE_GEMM_TUNE (default on)

// Index into `cands` of the algorithm to keep (0 when tuning cannot run).
int pick_algo(const TuneCall& call, const cublasLtMatmulAlgo_t* cands, int num_cands, TuneMode mode);

}  // namespace st::cuda
