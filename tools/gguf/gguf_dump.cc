// Small tool over GgufCheckpoint, for tools/gguf/check_smollm2.sh and compare_dequant_real.py.
//   gguf_dump info <file.gguf>                    config, tensor types, tokenizer; reads every tensor
//   gguf_dump tensor <file.gguf> <hf_name> <out>  writes the tensor (HF order) as raw f32
// Built by check_smollm2.sh against the st_io/st_core libraries of a build directory.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "io/gguf_checkpoint.h"

namespace {

int fail(const st::Status& s) {
  std::fprintf(stderr, "gguf_dump: %s\n", s.to_string().c_str());
  return 1;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int info(const st::GgufCheckpoint& ck) {
  const st::ModelConfig& c = ck.config();
  std::printf("arch %s  H %ld  L %ld  NH %ld  KVH %ld  D %ld  F %ld  vocab %ld  ctx %ld  eps %g  theta %g  tied %d\n",
              ck.file().get_string("general.architecture")->c_str(), c.hidden_size, c.num_layers, c.num_heads,
              c.num_kv_heads, c.head_dim, c.intermediate_size, c.vocab_size, c.max_position_embeddings,
              c.rms_norm_eps, c.rope_theta, c.tie_word_embeddings ? 1 : 0);
  std::map<std::string, int> types;
  for (const auto& t : ck.file().tensors()) types[st::ggml_type_name(t.type)]++;
  std::printf("tensors %zu:", ck.file().tensors().size());
  for (const auto& [k, v] : types) std::printf(" %s x%d", k.c_str(), v);
  std::printf("\n");
  auto tok = ck.tokenizer();
  if (!tok.ok()) return fail(tok.status());
  std::printf("tokenizer %s pre '%s'  tokens %zu  merges %zu  bos %d eos %d pad %d  chat_template %zu chars\n",
              tok->model.c_str(), tok->pre.c_str(), tok->tokens.size(), tok->merges.size(), tok->bos_id, tok->eos_id,
              tok->pad_id, tok->chat_template.size());
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint16_t> buf;
  int64_t total = 0;
  for (const std::string& n : ck.tensor_names()) {
    std::vector<int64_t> shape = *ck.shape(n);
    buf.resize(static_cast<size_t>(numel(shape)));
    st::Status s = ck.read_tensor_as(n, shape, st::DType::kBF16, buf.data());
    if (!s.ok()) return fail(s);
    total += numel(shape);
  }
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("read all %zu weights as bf16: %ld parameters in %.2f s\n", ck.tensor_names().size(), total, sec);
  return 0;
}

int dump_tensor(const st::GgufCheckpoint& ck, const std::string& name, const std::string& out) {
  auto shape = ck.shape(name);
  if (!shape.ok()) return fail(shape.status());
  std::vector<float> buf(static_cast<size_t>(numel(*shape)));
  st::Status s = ck.read_tensor_as(name, *shape, st::DType::kF32, buf.data());
  if (!s.ok()) return fail(s);
  FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr || std::fwrite(buf.data(), 4, buf.size(), f) != buf.size()) return fail(st::IOError("writing " + out));
  std::fclose(f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gguf_dump info FILE | gguf_dump tensor FILE HF_NAME OUT.f32\n");
    return 2;
  }
  auto ck = st::GgufCheckpoint::open(argv[2]);
  if (!ck.ok()) return fail(ck.status());
  std::string mode = argv[1];
  if (mode == "info") return info(*ck);
  if (mode == "tensor" && argc == 5) return dump_tensor(*ck, argv[3], argv[4]);
  std::fprintf(stderr, "gguf_dump: bad arguments\n");
  return 2;
}
