// Coded bases (model/weights.h, model/layer.cc Note [NF4 base]). The QLoRA base: a model whose
// linears are NF4 trains to the very bits of a dense model whose linears are the dequantized NF4
// weights -- losses and every LoRA gradient, two micro-batches, dropout, all targets, each
// recompute mode. The code12 base: a bf16 model whose linears are code12-coded trains to the bits
// of the same bf16 model stored dense. Also: the layouts, the packer's refusals (non-finite weights
// for NF4, a tensor code12 cannot hold), and the CPU backend's decoders against core/.
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "core/code12.h"
#include "core/nf4.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/pack.h"
#include "model/resident_source.h"
#include "model_step.h"

namespace st {
namespace {

const std::string kFixtures = std::string(ST_SOURCE_DIR) + "/tests/fixtures/";

using test::StepResult;

// One training step (two micro-batches) of the fixture model over `blobs` in `layout`.
StepResult train_step(const std::string& fixture, const LayerLayout& layout, const std::vector<const void*>& blobs,
                      Recompute mode, DType act = DType::kF32) {
  const std::string dir = test::fixture_model_dir(fixture);
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  CHECK_OK(be.status());
  auto mc = load_hf_config(dir + "/config.json");
  auto ck = Checkpoint::open(dir);
  CHECK_OK(mc.status());
  CHECK_OK(ck.status());
  auto m = Model::create(*mc, be->get(), test::all_targets_lora(),
                         {.act_dtype = act, .base_quant = layout.quant, .max_tokens = 16, .seed = 9,
                          .recompute = mode});
  CHECK_OK(m.status());
  Model& model = **m;
  EXPECT_EQ(model.layer_layout().bytes, layout.bytes);
  CHECK_OK(model.load_extras(*ck));
  auto src = ResidentLayerSource::from_host_blobs(be->get(), layout, blobs);
  CHECK_OK(src.status());
  test::init_lora_nonzero(model.lora());
  const std::vector<Batch> bs = test::two_micro_batches(mc->vocab_size);
  return test::run_step(**be, model, **src, {&bs[0], &bs[1]}, {0.5f, 0.5f});
}

struct Blobs {
  LayerLayout layout;
  std::vector<std::vector<char>> host;
  std::vector<const void*> ptrs() const {
    std::vector<const void*> p;
    for (const auto& h : host) p.push_back(h.data());
    return p;
  }
};

Blobs pack_all(const std::string& fixture, DType dt, BaseQuant q) {
  const std::string dir = kFixtures + fixture + "/model";
  auto mc = load_hf_config(dir + "/config.json");
  auto ck = Checkpoint::open(dir);
  CHECK_OK(mc.status());
  CHECK_OK(ck.status());
  Blobs b;
  b.layout = make_layer_layout(*mc, dt, q);
  for (int l = 0; l < mc->num_layers; ++l) {
    b.host.emplace_back(b.layout.bytes);
    CHECK_OK(pack_layer(*ck, b.layout, l, b.host.back().data()));
  }
  return b;
}

// The dense f32 blobs whose linears are the NF4 blobs' dequantized weights.
Blobs dequantized_twin(const std::string& fixture, const Blobs& nf4) {
  Blobs d = pack_all(fixture, DType::kF32, BaseQuant::kNone);
  for (size_t l = 0; l < d.host.size(); ++l) {
    for (size_t i = 0; i < nf4.layout.tensors.size(); ++i) {
      const LayerTensorSpec& s = nf4.layout.tensors[i];
      if (!s.quantized()) continue;
      const LayerTensorSpec& scales = nf4.layout.tensors[i + 1];
      const LayerTensorSpec* dense = d.layout.find(s.id);
      CHECK(dense != nullptr && dense->shape == s.quantized_shape);
      const char* q = nf4.host[l].data();
      nf4_dequantize(d.host[l].data() + dense->offset, DType::kF32, reinterpret_cast<const uint8_t*>(q + s.offset),
                     reinterpret_cast<const float*>(q + scales.offset), s.quantized_shape[0] * s.quantized_shape[1]);
    }
  }
  return d;
}

TEST(Nf4Base, LayoutStoresCodesAndScalesForTheSevenLinears) {
  auto mc = load_hf_config(kFixtures + "qwen2_tied/model/config.json");
  ASSERT_TRUE(mc.ok());
  const LayerLayout dense = make_layer_layout(*mc, DType::kBF16);
  const LayerLayout q = make_layer_layout(*mc, DType::kBF16, BaseQuant::kNF4);
  int quantized = 0;
  for (const LayerTensorSpec& s : q.tensors) {
    if (!s.quantized()) continue;
    ++quantized;
    const int64_t n = s.quantized_shape[0] * s.quantized_shape[1];
    EXPECT_EQ(s.dtype, DType::kU8);
    EXPECT_EQ(static_cast<int64_t>(s.nbytes), n / 2) << s.hf_suffix;
    const LayerTensorSpec* sc = nullptr;
    for (const LayerTensorSpec& t : q.tensors)
      if (t.hf_suffix == s.hf_suffix + ".absmax") sc = &t;
    ASSERT_NE(sc, nullptr) << s.hf_suffix;
    EXPECT_EQ(sc->dtype, DType::kF32);
    EXPECT_EQ(static_cast<int64_t>(sc->nbytes), n / 64 * 4);
  }
  EXPECT_EQ(quantized, 7);
  EXPECT_TRUE(q.find(LayerTensor::kQBias) && q.find(LayerTensor::kQBias)->dtype == DType::kBF16);  // Qwen2 biases stay
  EXPECT_LT(q.bytes * 3, dense.bytes);  // 4.5 bits a weight against 16
  ModelConfig odd = *mc;
  odd.intermediate_size = 100;  // down_proj [64, 100]: 6400 is a multiple of 64; gate [100, 64] too
  EXPECT_EQ(nf4_layout_error(odd), "");
  odd.hidden_size = 66;  // q_proj [64, 66]: 4224 = 66 x 64 ok, but o_proj [66, 64] ... k_proj [32, 66] = 2112 is not
  EXPECT_NE(nf4_layout_error(odd), "");
}

TEST(Nf4Base, TrainsToTheBitsOfItsDequantizedTwin) {
  for (const char* fixture : {"llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa", "qwen2_swa"}) {
    const Blobs nf4 = pack_all(fixture, DType::kF32, BaseQuant::kNF4);
    const Blobs twin = dequantized_twin(fixture, nf4);
    const Blobs orig = pack_all(fixture, DType::kF32, BaseQuant::kNone);
    const StepResult want = train_step(fixture, twin.layout, twin.ptrs(), Recompute::kFull);
    bool any_grad = false;
    for (float g : want.grads) any_grad = any_grad || g != 0.0f;
    ASSERT_TRUE(any_grad) << fixture << ": no LoRA gradient, the comparison would prove nothing";
    // The quantization is real: the original weights give another loss.
    EXPECT_NE(train_step(fixture, orig.layout, orig.ptrs(), Recompute::kFull).losses, want.losses) << fixture;
    for (Recompute mode : {Recompute::kFull, Recompute::kAttention, Recompute::kNone}) {
      const StepResult got = train_step(fixture, nf4.layout, nf4.ptrs(), mode);
      EXPECT_EQ(got.losses, want.losses) << fixture << " " << recompute_name(mode);
      ASSERT_EQ(got.grads.size(), want.grads.size());
      EXPECT_EQ(std::memcmp(got.grads.data(), want.grads.data(), got.grads.size() * sizeof(float)), 0)
          << fixture << " " << recompute_name(mode) << ": LoRA gradients differ from the dequantized twin";
    }
  }
}

// Packs layer 3 of the llama_gqa fixture in `quant` from a reader that fills every tensor of n
// elements with fill(name, n, dtype, dst); the packer's verdict.
Status pack_layer3(BaseQuant quant, const std::function<void(const std::string&, int64_t, DType, void*)>& fill) {
  auto mc = load_hf_config(kFixtures + "llama_gqa/model/config.json");
  CHECK_OK(mc.status());
  const LayerLayout layout = make_layer_layout(*mc, DType::kBF16, quant);
  std::vector<char> blob(layout.bytes);
  TensorReader reader = [&](const std::string& name, const std::vector<int64_t>& shape, DType dt, void* dst) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    fill(name, n, dt, dst);
    return Status::OK();
  };
  return pack_layer_with(reader, layout, 3, blob.data());
}

TEST(Nf4Base, PackerRefusesNonFiniteWeightsNamingTheTensor) {
  Status s = pack_layer3(BaseQuant::kNF4, [](const std::string& name, int64_t n, DType dt, void* dst) {
    if (dt == DType::kF32) {
      float* f = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) f[i] = 0.01f;
      if (name.find("up_proj") != std::string::npos) f[70] = std::nanf("");
    } else {
      std::memset(dst, 0, static_cast<size_t>(n) * dtype_size(dt));
    }
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.3.mlp.up_proj.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("element 70"), std::string::npos) << s.message();
}

TEST(Nf4Base, CpuBackendDequantMatchesTheReference) {
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  ASSERT_TRUE(be.ok());
  const int64_t out = 96, in = 64, n = out * in;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = std::cos(0.013f * static_cast<float>(i * i % 1009)) * (1 + i % 5);
  std::vector<uint8_t> codes(static_cast<size_t>(n / 2));
  std::vector<float> absmax(static_cast<size_t>(n / 64));
  nf4_quantize(x.data(), n, codes.data(), absmax.data());
  for (DType dt : {DType::kF32, DType::kBF16}) {
    std::vector<char> want(static_cast<size_t>(n) * dtype_size(dt)), got(want.size());
    nf4_dequantize(want.data(), dt, codes.data(), absmax.data(), n);
    (*be)->dequant_nf4(Tensor(got.data(), dt, {out, in}), Tensor(codes.data(), DType::kU8, {out, in / 2}),
                       Tensor(absmax.data(), DType::kF32, {n / 64}));
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0) << dtype_name(dt);
  }
}

TEST(Code12Base, LayoutCodesTheSevenLinearsInAboutTwelveBits) {
  auto mc = load_hf_config(kFixtures + "qwen2_tied/model/config.json");
  ASSERT_TRUE(mc.ok());
  const LayerLayout dense = make_layer_layout(*mc, DType::kBF16);
  const LayerLayout q = make_layer_layout(*mc, DType::kBF16, BaseQuant::kCode12);
  int coded = 0;
  for (size_t i = 0; i < q.tensors.size(); ++i) {
    const LayerTensorSpec& s = q.tensors[i];
    if (!s.quantized()) continue;
    ++coded;
    const int64_t n = s.quantized_shape[0] * s.quantized_shape[1];
    EXPECT_EQ(s.dtype, DType::kU8);
    EXPECT_EQ(static_cast<int64_t>(s.nbytes), n) << s.hf_suffix;
    ASSERT_LT(i + 1, q.tensors.size());
    EXPECT_EQ(q.tensors[i + 1].hf_suffix, s.hf_suffix + ".code12");
    EXPECT_EQ(static_cast<int64_t>(q.tensors[i + 1].nbytes), code12_aux_bytes(n));
  }
  EXPECT_EQ(coded, 7);
  EXPECT_TRUE(q.find(LayerTensor::kQBias) && q.find(LayerTensor::kQBias)->dtype == DType::kBF16);
  EXPECT_LT(q.bytes, dense.bytes);
  EXPECT_NE(base_layout_error(*mc, DType::kF32, BaseQuant::kCode12), "");  // bf16 only
  EXPECT_EQ(base_layout_error(*mc, DType::kBF16, BaseQuant::kCode12), "");
}

TEST(Code12Base, TrainsToTheBitsOfTheDenseBf16Base) {
  for (const char* fixture : {"llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa"}) {
    const Blobs coded = pack_all(fixture, DType::kBF16, BaseQuant::kCode12);
    const Blobs dense = pack_all(fixture, DType::kBF16, BaseQuant::kNone);
    const StepResult want = train_step(fixture, dense.layout, dense.ptrs(), Recompute::kFull, DType::kBF16);
    bool any_grad = false;
    for (float g : want.grads) any_grad = any_grad || g != 0.0f;
    ASSERT_TRUE(any_grad) << fixture << ": no LoRA gradient, the comparison would prove nothing";
    for (Recompute mode : {Recompute::kFull, Recompute::kNone}) {
      const StepResult got = train_step(fixture, coded.layout, coded.ptrs(), mode, DType::kBF16);
      EXPECT_EQ(got.losses, want.losses) << fixture << " " << recompute_name(mode);
      ASSERT_EQ(got.grads.size(), want.grads.size());
      EXPECT_EQ(std::memcmp(got.grads.data(), want.grads.data(), got.grads.size() * sizeof(float)), 0)
          << fixture << " " << recompute_name(mode) << ": LoRA gradients differ from the dense base";
    }
    // The coded bytes are what the run reads: one flipped sign+mantissa byte of a layer's
    // down_proj changes the losses.
    Blobs bent = coded;
    const LayerTensorSpec* down = bent.layout.find(LayerTensor::kDown);
    ASSERT_NE(down, nullptr);
    bent.host[0][down->offset + 5] ^= 0x40;
    EXPECT_NE(train_step(fixture, bent.layout, bent.ptrs(), Recompute::kFull, DType::kBF16).losses, want.losses)
        << fixture;
  }
}

TEST(Code12Base, PackerRefusesATensorItCannotHoldNamingIt) {
  Status s = pack_layer3(BaseQuant::kCode12, [](const std::string& name, int64_t n, DType dt, void* dst) {
    EXPECT_EQ(dt, DType::kBF16);
    uint16_t* h = static_cast<uint16_t*>(dst);
    // Weights over 64 binades (49 in 64 outside any 15-entry table) in up_proj only.
    const bool wide = name.find("up_proj") != std::string::npos;
    for (int64_t i = 0; i < n; ++i) h[i] = wide ? static_cast<uint16_t>((60 + i % 64) << 7) : f32_to_bf16(0.01f);
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.3.mlp.up_proj.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot be coded"), std::string::npos) << s.message();
}

TEST(Code12Base, CpuBackendDecodeMatchesTheReference) {
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  ASSERT_TRUE(be.ok());
  const int64_t out = 48, in = 40, n = out * in;
  std::vector<uint16_t> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[i] = f32_to_bf16(0.03f * std::sin(0.37f * static_cast<float>(i)));
  w[17] = 0x7F80;  // inf: an escape
  std::vector<uint8_t> body(static_cast<size_t>(n)), aux(static_cast<size_t>(code12_aux_bytes(n)));
  ASSERT_TRUE(code12_encode(w.data(), n, body.data(), aux.data(), "w").ok());
  std::vector<uint16_t> got(static_cast<size_t>(n), 0);
  (*be)->decode_code12(Tensor(got.data(), DType::kBF16, {out, in}), Tensor(body.data(), DType::kU8, {out, in}),
                       Tensor(aux.data(), DType::kU8, {static_cast<int64_t>(aux.size())}));
  EXPECT_EQ(got, w);
}

}  // namespace
}  // namespace st
