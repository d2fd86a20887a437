#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/file.h"
#include "core/json.h"
#include "io/safetensors.h"

namespace st {
namespace {

constexpr const char* kTargetNames[kNumLoraTargets] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                       "gate_proj", "up_proj", "down_proj"};
constexpr const char* kTargetModules[kNumLoraTargets] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

int64_t align_floats(int64_t n) { return (n + kLoraAlignFloats - 1) / kLoraAlignFloats * kLoraAlignFloats; }

// Our RNG (documented so the numbers can be reproduced elsewhere): splitmix64, one stream per
// tensor, seeded by mixing (seed, layer, target). Uniform in [0,1) from the top 24 bits.
uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t tensor_stream_seed(uint64_t seed, int layer, int target) {
  uint64_t s = seed;
  uint64_t a = splitmix64(&s);
  s = a ^ (static_cast<uint64_t>(layer) << 8) ^ static_cast<uint64_t>(target);
  return splitmix64(&s);
}

}  // namespace

const char* lora_target_name(LoraTarget t) { return kTargetNames[static_cast<int>(t)]; }
const char* lora_target_module(LoraTarget t) { return kTargetModules[static_cast<int>(t)]; }

StatusOr<std::vector<LoraTarget>> parse_lora_targets(const std::vector<std::string>& names) {
  std::vector<LoraTarget> out;
  auto add = [&](LoraTarget t) {
    for (LoraTarget x : out)
      if (x == t) return;
    out.push_back(t);
  };
  for (const std::string& raw : names) {
    if (raw == "all-linear") {
      for (int i = 0; i < kNumLoraTargets; ++i) add(static_cast<LoraTarget>(i));
      continue;
    }
    std::string n = raw.substr(raw.rfind('.') == std::string::npos ? 0 : raw.rfind('.') + 1);
    bool found = false;
    for (int i = 0; i < kNumLoraTargets; ++i) {
      std::string full = kTargetNames[i];
      if (n == full || n + "_proj" == full) {
        add(static_cast<LoraTarget>(i));
        found = true;
      }
    }
    if (!found)
      return Unimplemented(Str() << "LoRA target module '" << raw
                                 << "' is not supported (supported: q_proj k_proj v_proj o_proj gate_proj up_proj "
                                    "down_proj, all-linear)");
  }
  if (out.empty()) return InvalidArgument("lora_target_modules is empty");
  return out;
}

std::pair<int64_t, int64_t> lora_target_dims(const ModelConfig& c, LoraTarget t) {
  const int64_t H = c.hidden_size, F = c.intermediate_size;
  switch (t) {
    case LoraTarget::kQ: return {H, c.q_dim()};
    case LoraTarget::kK:
    case LoraTarget::kV: return {H, c.kv_dim()};
    case LoraTarget::kO: return {c.q_dim(), H};
    case LoraTarget::kGate:
    case LoraTarget::kUp: return {H, F};
    case LoraTarget::kDown: return {F, H};
    case LoraTarget::kCount: break;
  }
  CHECK(false, "bad LoraTarget");
  return {0, 0};
}

std::string peft_tensor_name(int layer, LoraTarget t, bool is_b) {
  return Str() << "base_model.model.model.layers." << layer << "." << lora_target_module(t)
               << (is_b ? ".lora_B.weight" : ".lora_A.weight");
}

std::string peft_magnitude_name(int layer, LoraTarget t) {
  return Str() << "base_model.model.model.layers." << layer << "." << lora_target_module(t)
               << ".lora_magnitude_vector";
}

StatusOr<std::unique_ptr<Lora>> Lora::create(Backend* be, const ModelConfig& mc, const LoraConfig& lc) {
  if (lc.r <= 0 || lc.r > kMaxLoraRank)
    return InvalidArgument(Str() << "lora_r must be in [1, " << kMaxLoraRank << "], got " << lc.r);
  for (size_t i = 0; i < lc.layers.size(); ++i) {
    if (lc.layers[i] < 0 || lc.layers[i] >= mc.num_layers)
      return InvalidArgument(Str() << "layers_to_transform: layer " << lc.layers[i] << " is not one of the model's "
                                   << mc.num_layers << " layers (0-" << mc.num_layers - 1 << ")");
    if (i > 0 && lc.layers[i] <= lc.layers[i - 1])
      return InvalidArgument("layers_to_transform: the layers must be listed once each, in ascending order");
  }
  std::unique_ptr<Lora> lora(new Lora(be, mc, lc));
  const int L = static_cast<int>(mc.num_layers);
  lora->off_.assign(static_cast<size_t>(L) * kNumLoraTargets, {-1, -1});
  if (lc.dora) lora->off_m_.assign(static_cast<size_t>(L) * kNumLoraTargets, -1);
  int64_t cur = 0;
  for (int l = 0; l < L; ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      if (!lc.targets[t] || !lc.on_layer(l)) continue;
      auto [in, out] = lora_target_dims(mc, static_cast<LoraTarget>(t));
      auto& o = lora->off_[lora->idx(l, static_cast<LoraTarget>(t))];
      o.first = cur;
      cur = align_floats(cur + lc.r * in);
      o.second = cur;
      cur = align_floats(cur + out * lc.r);
      if (lc.dora) {
        lora->off_m_[lora->idx(l, static_cast<LoraTarget>(t))] = cur;
        cur = align_floats(cur + out);
      }
    }
  }
  lora->section_ = cur;
  ASSIGN_OR_RETURN(void* p, be->alloc(lora->bytes()), "allocating LoRA parameters, grads and AdamW state");
  lora->base_ = static_cast<float*>(p);
  be->memset_zero(p, lora->bytes(), StreamId::kCompute);
  if (lc.dora) {
    // norm | scale of each target at twice m's offset (2 x section floats at most), then a vector
    // of -1 as long as the widest target (LoraLayer::neg_ones).
    int64_t max_out = 0;
    for (int t = 0; t < kNumLoraTargets; ++t)
      if (lc.targets[t]) max_out = std::max(max_out, lora_target_dims(mc, static_cast<LoraTarget>(t)).second);
    lora->dora_width_ = max_out;
    const size_t floats = static_cast<size_t>(2 * lora->section_ + max_out);
    ASSIGN_OR_RETURN(void* c, be->alloc(floats * sizeof(float)), "allocating the DoRA row norms");
    lora->dora_cache_ = static_cast<float*>(c);
    be->memset_zero(c, floats * sizeof(float), StreamId::kCompute);
    const std::vector<float> neg(static_cast<size_t>(max_out), -1.0f);
    be->copy_h2d(lora->dora_cache_ + 2 * lora->section_, neg.data(), neg.size() * sizeof(float), StreamId::kCompute);
    be->sync_stream(StreamId::kCompute);
  }
  return lora;
}

Lora::~Lora() {
  if (base_) {
    be_->sync_all();
    be_->free(base_);
  }
  if (dora_cache_) be_->free(dora_cache_);
}

Tensor Lora::section(int i) const { return Tensor(base_ + i * section_, DType::kF32, {section_}); }

Tensor Lora::view(int64_t s, int64_t off, int64_t rows, int64_t cols) const {
  return Tensor(base_ + s * section_ + off, DType::kF32, {rows, cols});
}

LoraLayer Lora::layer(int l) const {
  LoraLayer out;
  out.scaling = lc_.scaling();
  out.dropout = static_cast<float>(lc_.dropout);
  if (lc_.dora) out.neg_ones = Tensor(dora_cache_ + 2 * section_, DType::kF32, {dora_width_});
  for (int t = 0; t < kNumLoraTargets; ++t) {
    auto o = off_[idx(l, static_cast<LoraTarget>(t))];
    if (o.first < 0) continue;
    auto [in, outd] = lora_target_dims(mc_, static_cast<LoraTarget>(t));
    LoraPair& p = out.t[t];
    p.a = view(0, o.first, lc_.r, in);
    p.b = view(0, o.second, outd, lc_.r);
    p.da = view(1, o.first, lc_.r, in);
    p.db = view(1, o.second, outd, lc_.r);
    if (lc_.dora) {
      const int64_t om = off_m_[idx(l, static_cast<LoraTarget>(t))];
      p.mag = Tensor(base_ + om, DType::kF32, {outd});
      p.dmag = Tensor(base_ + section_ + om, DType::kF32, {outd});
      p.norm = Tensor(dora_cache_ + 2 * om, DType::kF32, {outd});
      p.scale = Tensor(dora_cache_ + 2 * om + outd, DType::kF32, {outd});
    }
  }
  return out;
}

void Lora::disable_adapter() {
  CHECK(!lc_.dora, "Lora: disable_adapter with DoRA");
  be_->copy_d2d(base_ + section_, base_, static_cast<size_t>(section_) * sizeof(float), StreamId::kCompute);
  for (size_t i = 0; i < off_.size(); ++i) {
    if (off_[i].second < 0) continue;
    const LoraTarget t = static_cast<LoraTarget>(static_cast<int64_t>(i) % kNumLoraTargets);
    const int64_t out = lora_target_dims(mc_, t).second;
    be_->memset_zero(base_ + off_[i].second, static_cast<size_t>(out * lc_.r) * sizeof(float), StreamId::kCompute);
  }
}

void Lora::enable_adapter() {
  be_->copy_d2d(base_, base_ + section_, static_cast<size_t>(section_) * sizeof(float), StreamId::kCompute);
}

void Lora::zero_grads() { be_->memset_zero(base_ + section_, section_ * sizeof(float), StreamId::kCompute); }

void Lora::init(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(section_), 0.0f);
  for (int l = 0; l < static_cast<int>(mc_.num_layers); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      int64_t oa = off_[idx(l, static_cast<LoraTarget>(t))].first;
      if (oa < 0) continue;
      const int64_t in = lora_target_dims(mc_, static_cast<LoraTarget>(t)).first;
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      uint64_t s = tensor_stream_seed(seed, l, t);
      for (int64_t i = 0; i < lc_.r * in; ++i) {
        double u = static_cast<double>(splitmix64(&s) >> 40) * (1.0 / 16777216.0);  // [0,1)
        host[static_cast<size_t>(oa + i)] = static_cast<float>((2.0 * u - 1.0) * bound);
      }
    }
  }
  be_->memset_zero(base_, bytes(), StreamId::kCompute);
  params_from_host(host);
  magnitudes_pending_ = lc_.dora;
}

std::vector<float> Lora::params_to_host() const {
  std::vector<float> host(static_cast<size_t>(section_));
  be_->copy_d2h(host.data(), base_, section_ * sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  return host;
}

void Lora::params_from_host(const std::vector<float>& host) {
  CHECK(static_cast<int64_t>(host.size()) == section_);
  be_->copy_h2d(base_, host.data(), section_ * sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
}

}  // namespace st
