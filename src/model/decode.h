// Incremental decoding with a KV cache: prefill a prompt, then one token per step.
//
// The layer math is the training forward's (model/layer.h: HF pre-norm block with PEFT LoRA,
// Qwen2 biases, Qwen3 qk-norm), written here against the Backend with one difference: k and v of
// each new token are appended to a per-layer cache, and attention reads the cache
// (Backend::attention_kv) at absolute positions. Logits therefore equal the full-sequence
// forward's for the same tokens (tests/model/decode_test.cc).
//
// Layers come through a LayerSource: every forward() visits layers 0..L-1 once (one begin_step /
// end_step), so a streamed source works unchanged. Long prompts are fed in chunks of at most
// max_chunk tokens (chunked prefill: each chunk attends the cache so far).
//
// Memory: one backend allocation made by create(): KV cache 2 x L x max_seq x KVH x D (act dtype),
// the scratch of one chunk, and f32 logits of one chunk. Nothing is allocated per step.
// Not thread-safe. The backend, extras, layer source and LoRA must outlive the Decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "model/weights.h"

namespace st {

struct DecoderOptions {
  int64_t max_seq = 2048;   // cache capacity in tokens (prompt + generated)
  int64_t max_chunk = 256;  // tokens per prefill pass
  DType act = DType::kBF16; // activation / cache dtype; must equal the layer weights' dtype
};

enum class LogitsFor { kLast, kAll };

class Decoder {
 public:
  // lora may be null (base model only). Extras views are backend memory.
  static StatusOr<std::unique_ptr<Decoder>> create(Backend* be, const ModelConfig& c, const ExtrasWeights& extras,
                                                   LayerSource* layers, const Lora* lora, const DecoderOptions& o);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Runs `ids` at positions pos() .. pos()+n-1, appending their k/v to the cache. Returns host f32
  // logits: [n, V] row-major for kAll, [V] (the last token's) for kLast. Blocks until they are on
  // the host. InvalidArgument when the cache would overflow or an id is outside the vocabulary.
  StatusOr<std::vector<float>> forward(std::span<const int32_t> ids, LogitsFor which);

  int64_t pos() const { return pos_; }  // tokens in the cache
  void reset() { pos_ = 0; }            // forget the cache (the bytes are simply overwritten)
  const ModelConfig& config() const { return cfg_; }

 private:
  Decoder(Backend* be, const ModelConfig& c, const ExtrasWeights& e, LayerSource* l, const Lora* lora,
          const DecoderOptions& o);
  Status allocate();
  void run_chunk(const int32_t* ids, int64_t n, LogitsFor which, float* host_logits);

  Backend* be_;
  ModelConfig cfg_;
  ExtrasWeights extras_;
  LayerSource* layers_;
  const Lora* lora_;
  DecoderOptions opts_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  int64_t pos_ = 0;
};

// Sampling from one row of logits [V]. temperature <= 0: greedy (argmax, lowest id on ties).
// Else softmax(logits / temperature), restricted to the smallest set of most likely tokens whose
// mass reaches top_p (top_p >= 1: all), sampled with `rng`.
struct SamplingOptions {
  float temperature = 0.0f;
  float top_p = 1.0f;
};
int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, std::mt19937_64& rng);

}  // namespace st
