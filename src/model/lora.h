// LoRA adapter state: for each layer and each targeted projection, A [r, in] and B [out, r]
// (f32 master weights), their gradients and AdamW moments.
//
// Note [lora arena]: all of it lives in ONE backend allocation split into four equal f32
// sections  params | grads | m | v  (each `numel()` floats, tensors at the same offsets in every
// section, each tensor's start aligned to kLoraAlignFloats). The optimizer, the grad-norm and
// checkpointing therefore work on four flat buffers; padding floats are zero and stay zero.
//
// Init (PEFT init_lora_weights=true): A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform a=sqrt(5)),
// B = 0. The RNG is our own (see lora.cc: splitmix64 per tensor, seeded by (seed, layer, target)),
// so it does not reproduce torch's numbers; goldens load their initial adapter instead.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"

namespace st {

enum class LoraTarget { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kCount };
constexpr int kNumLoraTargets = static_cast<int>(LoraTarget::kCount);
const char* lora_target_name(LoraTarget t);           // "q_proj", ..., "down_proj"
const char* lora_target_module(LoraTarget t);         // "self_attn.q_proj", "mlp.down_proj"
// Parses "q_proj"/"q" (etc.) or "all-linear"; InvalidArgument naming an unknown module.
StatusOr<std::vector<LoraTarget>> parse_lora_targets(const std::vector<std::string>& names);

struct LoraConfig {
  int64_t r = 8;
  double alpha = 16;
  double dropout = 0.0;
  std::array<bool, kNumLoraTargets> targets{};  // which projections carry LoRA
  // rsLoRA (PEFT use_rslora, Kalajdzievski 2023): the update is scaled by alpha / sqrt(r) instead
  // of alpha / r, so higher ranks keep learning. Only the scale differs; everything else is LoRA.
  bool rslora = false;
  // DoRA (PEFT use_dora, Liu et al. 2024): each target also learns a magnitude vector m [out]; the
  // output is (m / ||W + s B A||_row) * (x W^T + s x A^T B^T) + bias (model/layer.cc Note [DoRA]).
  bool dora = false;
  // PEFT layers_to_transform (axolotl peft_layers_to_transform): the decoder layers that carry the
  // adapter, ascending and distinct; empty = every layer. A layer without it runs its linears plain.
  std::vector<int64_t> layers;
  bool on_layer(int64_t l) const { return layers.empty() || std::binary_search(layers.begin(), layers.end(), l); }
  int64_t adapted_layers(int64_t num_layers) const {
    return layers.empty() ? num_layers : static_cast<int64_t>(layers.size());
  }
  float scaling() const {
    const double rank = static_cast<double>(r);
    return static_cast<float>(alpha / (rslora ? std::sqrt(rank) : rank));
  }
  bool has(LoraTarget t) const { return targets[static_cast<int>(t)]; }
};

// [in, out] features of a projection.
std::pair<int64_t, int64_t> lora_target_dims(const ModelConfig& c, LoraTarget t);

constexpr int64_t kLoraAlignFloats = 64;  // 256 bytes
// The largest rank accepted anywhere (configs, PEFT adapters): far past any real adapter, and it
// keeps r x width element counts far from int64 overflow.
constexpr int64_t kMaxLoraRank = 65536;

// One adapted projection in one layer. Views into the arena (backend memory, f32).
struct LoraPair {
  Tensor a, b;    // A [r, in], B [out, r]
  Tensor da, db;  // gradients, same shapes
  Tensor mag, dmag;  // DoRA: the magnitude vector m [out] and its gradient; empty for plain LoRA
  // DoRA: ||W + s B A||_row and m / that norm, f32 [out] each, as the layer's last forward formed
  // them (model/layer.cc Note [DoRA]); not parameters (outside the arena).
  Tensor norm, scale;
  bool present() const { return !a.empty(); }
  bool dora() const { return !mag.empty(); }
};
struct LoraLayer {
  std::array<LoraPair, kNumLoraTargets> t;
  float scaling = 1.0f;
  float dropout = 0.0f;
  Tensor neg_ones;  // DoRA: f32 [widest target] of -1 (a per-column scale that subtracts: layer.cc)
  const LoraPair& operator[](LoraTarget x) const { return t[static_cast<int>(x)]; }
};

class Lora {
 public:
  // Allocates the arena on `be` (ResourceExhausted on OOM) and zero-fills it. Not initialised.
  static StatusOr<std::unique_ptr<Lora>> create(Backend* be, const ModelConfig& mc, const LoraConfig& lc);
  ~Lora();
  Lora(const Lora&) = delete;
  Lora& operator=(const Lora&) = delete;

  // PEFT default init (see file comment); deterministic in `seed`. Zeroes grads and moments.
  // DoRA magnitudes are left zero and magnitudes_pending() set: PEFT starts m at the row norms of
  // the base weights, which the caller computes (Model::init_dora_magnitudes) before training.
  void init(uint64_t seed);
  bool magnitudes_pending() const { return magnitudes_pending_; }
  void set_magnitudes_pending(bool v) { magnitudes_pending_ = v; }

  const LoraConfig& config() const { return lc_; }
  const ModelConfig& model_config() const { return mc_; }
  LoraLayer layer(int l) const;
  int64_t numel() const { return section_; }            // floats per section (incl. padding)
  size_t bytes() const { return 4 * section_ * sizeof(float); }  // whole arena
  Tensor params() const { return section(0); }
  Tensor grads() const { return section(1); }
  Tensor adam_m() const { return section(2); }
  Tensor adam_v() const { return section(3); }
  void zero_grads();
  // Note [adapter disabled]: the base model's outputs through the same kernels, for a preference
  // loss's reference (train/preference_loss.h). disable_adapter() copies the parameters into the
  // gradient section and zeroes every B, so each LoRA term adds exact zeros (y + s t 0 = y);
  // enable_adapter() copies them back, bit for bit. The gradients are lost: call between windows,
  // before zero_grads(). Plain LoRA only (DoRA's magnitude rescales even with B = 0). Enqueued on
  // the compute stream, so forwards enqueued in between see the zeroed B.
  void disable_adapter();
  void enable_adapter();

  // Offsets (floats within a section) of A and B of (layer, target); -1 when absent.
  int64_t offset_a(int l, LoraTarget t) const { return off_[idx(l, t)].first; }
  int64_t offset_b(int l, LoraTarget t) const { return off_[idx(l, t)].second; }
  // Offset of the DoRA magnitude m [out] of (layer, target); -1 when absent or not DoRA.
  int64_t offset_mag(int l, LoraTarget t) const { return off_m_.empty() ? -1 : off_m_[idx(l, t)]; }

  // Host copies of the parameter section (blocks: syncs the compute stream).
  std::vector<float> params_to_host() const;
  void params_from_host(const std::vector<float>& host);

  // PEFT adapter I/O: adapter_model.safetensors (f32 A/B, DoRA's m) + adapter_config.json in `dir`.
  // save: writes atomically; base_model_name goes to base_model_name_or_path.
  Status save_peft(const std::string& dir, const std::string& base_model_name) const;
  // load: validates adapter_config.json against this Lora's rank/alpha/targets/use_dora and refuses
  // unsupported variants (non-LORA peft_type, pissa/olora/... init, ...) by name; every expected
  // A/B (and DoRA magnitude) tensor must be present with the right shape (any float dtype).
  Status load_peft(const std::string& dir);

 private:
  Lora(Backend* be, const ModelConfig& mc, const LoraConfig& lc) : be_(be), mc_(mc), lc_(lc) {}
  size_t idx(int l, LoraTarget t) const { return static_cast<size_t>(l) * kNumLoraTargets + static_cast<int>(t); }
  Tensor section(int i) const;
  Tensor view(int64_t section_index, int64_t off, int64_t rows, int64_t cols) const;

  Backend* be_;
  ModelConfig mc_;
  LoraConfig lc_;
  int64_t section_ = 0;
  std::vector<std::pair<int64_t, int64_t>> off_;  // per (layer, target)
  std::vector<int64_t> off_m_;                    // DoRA: m's offset per (layer, target); else empty
  float* base_ = nullptr;
  float* dora_cache_ = nullptr;                   // DoRA: norm | scale per (layer, target), at 2 x off_m_; -1s
  int64_t dora_width_ = 0;                        // DoRA: the widest target's out
  bool magnitudes_pending_ = false;
};

// Reads adapter_config.json of a PEFT adapter dir into a LoraConfig, refusing unsupported
// variants by name (see Lora::load_peft). Used by the loader and by cli to pick r/alpha/targets.
StatusOr<LoraConfig> read_peft_config(const std::string& dir);
// Name of a tensor in adapter_model.safetensors.
std::string peft_tensor_name(int layer, LoraTarget t, bool is_b);
// Name of a DoRA magnitude vector there ("...q_proj.lora_magnitude_vector", as PEFT saves it).
std::string peft_magnitude_name(int layer, LoraTarget t);

}  // namespace st
