// A GGUF model file seen as an HF-style checkpoint: ModelConfig from the metadata, tensors under
// their HF names in HF shapes and HF row order, dequantised to f32/bf16/f16 on read.
//
// Mapping (formats.md §2.7, §4.7-4.9):
// - config: general.architecture in {llama, qwen2, qwen3} (Mistral GGUFs say "llama"); the
//   <arch>.* keys give H, L, F, NH, KVH, eps, rope base, context length; head_dim from
//   <arch>.attention.key_length, else H/NH (rope.dimension_count must equal it: no partial
//   rotary); vocab from <arch>.vocab_size, else the tokenizer, else token_embd; tied embeddings
//   when output.weight is absent; attention_bias when blk.0.attn_q.bias exists; qk_norm when
//   blk.0.attn_q_norm.weight exists; linear rope scaling from <arch>.rope.scaling.*; llama3
//   scaling recognised from a rope_freqs.weight tensor that matches the llama3 formula.
// - names: token_embd -> model.embed_tokens, blk.N.attn_q -> model.layers.N.self_attn.q_proj, ...
//   (gguf_to_hf_name). GGUF ne is the HF shape reversed; the bytes need no transpose.
// - arch llama only: the converter permuted the rows of q (n_head = NH) and k (n_head = KVH)
//   weights and biases for ggml's NORM rope; read_tensor_as undoes it, so callers always get
//   HF row order and use the rotate_half convention.
// open() maps the file, validates it (gguf.h), derives the config and checks that every tensor
// the config implies is present with the right shape and a dequantisable type, and that no
// unknown tensor is present. Thread safety: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf.h"
#include "io/hf_config.h"

namespace st {

// The tokenizer a GGUF file carries (tokenizer.ggml.* and tokenizer.chat_template). Plain data:
// the data module builds its Tokenizer from these parts (Tokenizer::from_gguf_parts).
struct GgufTokenizerData {
  std::string model;                  // tokenizer.ggml.model: "gpt2" = byte-level BPE, "llama" = SentencePiece
  std::string pre;                    // tokenizer.ggml.pre ("smollm", "qwen2", "llama-bpe"); "" if absent
  std::vector<std::string> tokens;    // index = token id: byte-level strings ("Ġthe") for "gpt2",
                                      // SentencePiece pieces ("▁the", "<0x0A>") for "llama"
  std::vector<std::string> merges;    // "left right", index = rank; empty if absent
  std::vector<int32_t> token_types;   // 1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte; empty if absent
  std::vector<float> scores;          // tokenizer.ggml.scores (one finite f32 per token); empty if absent
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1;  // -1 = absent
  bool add_bos = false;               // tokenizer.ggml.add_bos_token (if absent: true for "llama", else false)
  bool add_eos = false;               // tokenizer.ggml.add_eos_token (false if absent)
  bool add_space_prefix = true;       // tokenizer.ggml.add_space_prefix (true if absent)
  std::string chat_template;          // "" if absent
};

// Reads the tokenizer keys. NotFound when tokenizer.ggml.tokens is missing; InvalidArgument on
// wrong types, ids outside the vocabulary, a token_type or scores array of another length, or a
// score that is not finite.
StatusOr<GgufTokenizerData> read_gguf_tokenizer(const GgufFile& f);

// GGUF tensor name -> HF name ("blk.3.ffn_up.weight" -> "model.layers.3.mlp.up_proj.weight").
// NotFound for names outside the table (rope_freqs.weight included: it is not a weight).
StatusOr<std::string> gguf_to_hf_name(const std::string& gguf_name);
// The inverse; NotFound for names outside the table.
StatusOr<std::string> hf_to_gguf_name(const std::string& hf_name);

// ModelConfig from the metadata (and tensor presence) of an opened file; errors name the file and key.
StatusOr<ModelConfig> gguf_model_config(const GgufFile& f);

// The GGUF row that holds HF row `r` of a q/k tensor whose rows llama.cpp's converter permuted
// (head_dim D): HF row h*D + a*D/2 + i sits at GGUF row h*D + 2*i + a.
inline int64_t gguf_row_of_hf_row(int64_t r, int64_t D) {
  const int64_t h = r / D, a = (r % D) / (D / 2), i = r % (D / 2);
  return h * D + 2 * i + a;
}

class GgufCheckpoint {
 public:
  static StatusOr<GgufCheckpoint> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }
  // For fingerprints/manifests: the one file, and "gguf:<path>".
  std::vector<std::string> files() const { return {file_.path()}; }
  std::string describe() const { return "gguf:" + file_.path(); }

  // HF names of all weights in the file (GGUF tensor-info order).
  std::vector<std::string> tensor_names() const;
  bool has(const std::string& hf_name) const;
  // HF shape of a tensor, or NotFound naming it and the file.
  StatusOr<std::vector<int64_t>> shape(const std::string& hf_name) const;
  // The GGUF tensor behind an HF name, or NotFound.
  StatusOr<const GgufTensorInfo*> find(const std::string& hf_name) const;

  // Dequantises tensor `hf_name` into host memory `dst` (numel * dtype_size(dst_dtype) bytes) as
  // `dst_dtype` (F32/BF16/F16, RNE from the f32 value), in HF shape and HF row order (q/k of
  // arch llama un-permuted). Its HF shape must equal `expect_shape`. Errors name the tensor and file.
  Status read_tensor_as(const std::string& hf_name, const std::vector<int64_t>& expect_shape, DType dst_dtype,
                        void* dst) const;

  StatusOr<GgufTokenizerData> tokenizer() const { return read_gguf_tokenizer(file_); }

  // Heads whose rows the converter permuted for this tensor (0: not permuted; Note [q/k
  // un-permutation]): a writer must permute them back (gguf_row_of_hf_row).
  int64_t permuted_heads(const std::string& hf_name) const;

 private:
  Status check_tensors() const;

  GgufFile file_;
  ModelConfig config_;
  std::vector<std::string> hf_names_;              // parallel to file_.tensors() (empty = unmapped)
  std::vector<std::pair<std::string, size_t>> by_hf_;  // sorted (hf name, tensor index)
};

}  // namespace st
