// Planner: sizes every device arena of a (streaming) training run before anything is allocated,
// decides how many layers stay resident, and refuses an impossible plan up front (design.md §3).
//
// Terms (bytes): resident layers, pool slots (n x layer blob), extras (embedding, final norm,
// lm_head unless it streams), activation checkpoints (L x tokens x H x act), hidden/gradient
// buffers, one layer's recompute scratch (model/layer.h layer_scratch_bytes), the logits chunk,
// LoRA params + grads + AdamW moments, library workspaces. It keeps as many layers resident as
// fit; resident layers are spread evenly over the depth so each streamed copy overlaps the
// compute of the resident layers around it. An untied lm_head streams (in vocabulary chunks,
// double-buffered) when it is large next to the budget (> 1/8) or when the minimal plan does
// not fit with it resident.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/byte_size.h"
#include "io/hf_config.h"
#include "model/lora.h"

namespace st {


constexpr int64_t kLogitsChunkCols = 8192;         // vocabulary columns per logits chunk
constexpr uint64_t kCudaWorkspaceBytes = 64ull << 20;  // cuBLASLt + attention workspaces

struct PlanInput {
  ModelConfig model;
  DType dtype = DType::kBF16;  // weights and activations
  int64_t micro_batch_size = 1;
  int64_t sequence_len = 2048;
  LoraConfig lora;
  int num_slots = 2;           // stream_buffers
  std::string tier = "ram";    // off | ram | disk
  DeviceKind device = DeviceKind::kCpu;
  uint64_t vram_budget = 0;    // 0 = default (below)
  // Free device memory (for the default budget: free minus max(512 MiB, 5%)). 0 with no budget
  // = unlimited (CPU runs).
  uint64_t device_free_bytes = 0;
};

struct PlanTerm {
  std::string name;
  uint64_t bytes = 0;
};

struct Plan {
  std::string tier;                 // off | ram | disk
  int num_slots = 0;                // pool slots (0 when nothing streams)
  std::vector<int> resident_layers; // sorted
  int num_layers = 0;
  bool lm_head_streamed = false;
  uint64_t layer_bytes = 0;
  uint64_t budget = 0;
  std::vector<PlanTerm> vram;       // device bytes by term
  uint64_t vram_total = 0;
  uint64_t host_bytes = 0;          // RAM-store arena or disk staging ring
  int streamed_layers() const { return num_layers - static_cast<int>(resident_layers.size()); }
  std::string banner() const;       // multi-line, for the run banner
};

// ResourceExhausted (before any allocation) naming the largest term and what would fit.
StatusOr<Plan> make_plan(const PlanInput& in);

}  // namespace st
