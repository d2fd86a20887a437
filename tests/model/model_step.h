// Shared by the model tests that train one step of a fixture model on the CPU and compare its
// bits across variants (recompute modes, an NF4 base, layer-major order): the adapter every one of
// them uses and the step itself; and a source that says it loads its layers (layer-major evaluation).
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st::test {

struct StepResult {
  std::vector<double> losses;  // per micro-batch
  std::vector<float> grads;    // the whole LoRA gradient arena
};

inline std::string fixture_model_dir(const std::string& fixture) {
  return std::string(ST_SOURCE_DIR) + "/tests/fixtures/" + fixture + "/model";
}

// r 2, alpha 4, LoRA dropout 0.2, all seven targets.
inline LoraConfig all_targets_lora() {
  LoraConfig lc;
  lc.r = 2;
  lc.alpha = 4;
  lc.dropout = 0.2;
  lc.targets.fill(true);
  return lc;
}

// The default initialisation (seed 4) with B made non-zero, so dA is not zero either.
inline void init_lora_nonzero(Lora& lora) {
  lora.init(4);
  std::vector<float> p = lora.params_to_host();
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] == 0.0f) p[i] = 0.02f * static_cast<float>((i * 7919) % 13) - 0.12f;
  lora.params_from_host(p);
}

// n deterministic token ids below vocab: (i * mul + add) % vocab.
inline std::vector<int32_t> fixture_tokens(int64_t n, int64_t vocab, int64_t mul = 37, int64_t add = 11) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>((i * mul + add) % vocab));
  return out;
}

// Two micro-batches of 2 x 8 tokens (labels = inputs), the same for every test that uses them.
inline std::vector<Batch> two_micro_batches(int64_t vocab) {
  std::vector<Batch> bs(2);
  for (Batch& b : bs) {
    b.batch = 2;
    b.seq = 8;
  }
  bs[0].input_ids = fixture_tokens(16, vocab);
  bs[1].input_ids = fixture_tokens(16, vocab, 53, 5);
  for (Batch& b : bs) b.labels = b.input_ids;
  return bs;
}

// A fixture model on a CPU backend of `threads` threads: every layer resident from its checkpoint,
// LoRA `lc` (default all_targets_lora) initialised by init_lora_nonzero.
struct FixtureModel {
  std::unique_ptr<Backend> be;
  ModelConfig config;
  std::unique_ptr<Model> model;
  std::unique_ptr<ResidentLayerSource> src;
};
inline FixtureModel open_fixture_model(const std::string& fixture, int threads, const ModelOptions& o,
                                       const LoraConfig& lc = all_targets_lora()) {
  const std::string dir = fixture_model_dir(fixture);
  FixtureModel f;
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = threads});
  CHECK_OK(be.status());
  f.be = std::move(be).value();
  auto mc = load_hf_config(dir + "/config.json");
  auto ck = Checkpoint::open(dir);
  CHECK_OK(mc.status());
  CHECK_OK(ck.status());
  f.config = *mc;
  auto m = Model::create(f.config, f.be.get(), lc, o);
  CHECK_OK(m.status());
  f.model = std::move(m).value();
  CHECK_OK(f.model->load_extras(*ck));
  auto src = ResidentLayerSource::from_checkpoint(f.be.get(), f.config, f.model->layer_layout(), *ck);
  CHECK_OK(src.status());
  f.src = std::move(src).value();
  init_lora_nonzero(f.model->lora());
  return f;
}

// Zeroes the gradients, runs one forward_backward over `batches` and reads losses and gradients.
inline StepResult run_step(Backend& be, Model& model, LayerSource& src, const std::vector<const Batch*>& batches,
                           const std::vector<float>& scales) {
  Lora& lora = model.lora();
  lora.zero_grads();
  auto losses = model.forward_backward(batches, src, scales);
  CHECK_OK(losses.status());
  StepResult r;
  r.losses = *losses;
  r.grads.resize(static_cast<size_t>(lora.numel()));
  be.copy_d2h(r.grads.data(), lora.grads().data, r.grads.size() * sizeof(float), StreamId::kCompute);
  be.sync_all();
  return r;
}

// Serves the resident layers but says it loads them, and counts what a step asks of it.
class LoadingSource : public LayerSource {
 public:
  explicit LoadingSource(LayerSource* inner) : inner_(inner) {}
  void begin_step(const std::vector<int>& visits) override {
    ++steps;
    inner_->begin_step(visits);
  }
  LayerWeights acquire(int layer) override {
    ++acquires;
    return inner_->acquire(layer);
  }
  void release(int layer) override { inner_->release(layer); }
  void end_step() override { inner_->end_step(); }
  bool loads_layers() const override { return true; }
  int steps = 0, acquires = 0;

 private:
  LayerSource* inner_;
};

}  // namespace st::test
