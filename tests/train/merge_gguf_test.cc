// merge_lora with a GGUF base and a .gguf output (merge.cc Note [GGUF merge]), and the tokenizer
// files an HF-directory merge of a GGUF base gets (their HF parity on real vocabularies is
// gguf_vocab_test's ExportedTokenizerJsonEncodesAsHf). Oracles: the same
// merge written as an HF checkpoint in the same dtype -- every tensor read back from the GGUF
// (dequantized, q/k un-permuted) equals it bit for bit; the untouched tensors keep their
// quantized types and bytes; the metadata is the base's; and the `gguf` Python package (the
// llama.cpp project's reader) opens the file and sees the same tensors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file.h"
#include "data/model_tokenizer.h"
#include "io/gguf_checkpoint.h"
#include "io/safetensors.h"
#include "../run_command.h"
#include "merge_test_util.h"
#include "model/init_model.h"
#include "model/presets.h"
#include "train/merge.h"

namespace st {
namespace {
namespace fs = std::filesystem;

class MergeGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(MergeGguf, EqualsTheHfMergeTensorForTensor) {
  const std::string base = std::string(ST_SOURCE_DIR) + "/tests/fixtures/gguf/" + GetParam() + ".gguf";
  const std::string adapter = tmp("gg_adapter"), out = tmp("gg_out") + ".gguf", hf = tmp("gg_hf");
  auto bck = GgufCheckpoint::open(base);
  ASSERT_TRUE(bck.ok()) << bck.status().to_string();
  LoraConfig lc = some_targets();
  lc.targets[static_cast<int>(LoraTarget::kK)] = true;  // k: a permuted tensor on llama
  write_adapter(bck->config(), lc, adapter);

  for (DType dt : {DType::kF32, DType::kF16}) {
    MergeOptions o;
    o.dtype = dt;
    o.overwrite = true;
    auto r = merge_lora(base, adapter, out, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->merged, 5 * bck->config().num_layers);
    EXPECT_EQ(r->files, std::vector<std::string>{fs::path(out).filename().string()});
    ASSERT_TRUE(merge_lora(base, adapter, hf, o).ok());
    // The HF merge of a GGUF base carries tokenizer files written from its vocabulary.
    auto ht = load_model_tokenizer(hf), gt = load_model_tokenizer(base);
    ASSERT_TRUE(ht.ok()) << ht.status().to_string();
    ASSERT_TRUE(gt.ok()) << gt.status().to_string();
    EXPECT_TRUE(fs::exists(hf + "/tokenizer_config.json"));
    for (const char* text : {"hello world", "ab ba  c\n", ""})
      EXPECT_EQ(ht->encode(text, AddSpecial::kYes), gt->encode(text, AddSpecial::kYes)) << text;

    auto g = GgufCheckpoint::open(out);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->file().keys(), bck->file().keys());  // every metadata key, in order
    auto ck = Checkpoint::open(hf);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto sf = SafetensorsFile::open(hf + "/model.safetensors");
    ASSERT_TRUE(sf.ok());
    int merged = 0;
    for (const auto& t : sf->tensors()) {
      auto shape = g->shape(t.name);
      ASSERT_TRUE(shape.ok()) << t.name;
      ASSERT_EQ(*shape, t.shape) << t.name;
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const GgufTensorInfo* gi = *g->find(t.name);
      const GgufTensorInfo* bi = *bck->find(t.name);
      const bool was_merged = gi->type != bi->type || (bi->type == GgmlType::kF32 && std::memcmp(g->file().data(*gi), bck->file().data(*bi), bi->nbytes) != 0);
      if (!was_merged) {  // untouched: the base's type and bytes
        EXPECT_EQ(gi->type, bi->type) << t.name;
        EXPECT_EQ(std::memcmp(g->file().data(*gi), bck->file().data(*bi), bi->nbytes), 0) << t.name;
      } else {
        ++merged;
        EXPECT_EQ(gi->type, dt == DType::kF32 ? GgmlType::kF32 : GgmlType::kF16) << t.name;
      }
      // The HF merge holds every tensor in `dt`: equal where the GGUF holds it in `dt` too.
      if (dt != DType::kF32 && !was_merged) continue;
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      ASSERT_TRUE(g->read_tensor_as(t.name, t.shape, DType::kF32, a.data()).ok()) << t.name;
      ASSERT_TRUE(read_tensor_as(*ck, t.name, t.shape, DType::kF32, b.data()).ok()) << t.name;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << t.name;
    }
    EXPECT_EQ(merged, 5 * bck->config().num_layers);
  }

  // An adapter saved by `train` with a chat template (merge.cc Note [the adapter's tokenizer]): the
  // merged file's tokenizer.chat_template is that template, the other keys as the base's.
  const std::string tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  auto saved = save_model_tokenizer(base, adapter, tmpl);
  ASSERT_TRUE(saved.ok()) << saved.status().to_string();
  {
    MergeOptions o;
    o.overwrite = true;
    auto r = merge_lora(base, adapter, out, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto g = GgufCheckpoint::open(out);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const GgufValue* v = g->file().find("tokenizer.chat_template");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(std::string(v->str), tmpl);
    std::vector<std::string> keys = bck->file().keys(), got = g->file().keys();
    if (!bck->file().find("tokenizer.chat_template")) keys.push_back("tokenizer.chat_template");
    EXPECT_EQ(got, keys);
  }

  // llama.cpp's own reader opens it and lists the base's tensors.
  const std::string cmd = "python3 -c \"import gguf,sys; a=gguf.GGUFReader(sys.argv[1]); b=gguf.GGUFReader(sys.argv[2]); "
                          "assert [t.name for t in a.tensors]==[t.name for t in b.tensors]; print(len(a.tensors))\" " +
                          out + " " + base + " 2>&1";
  int rc = -1;
  const std::string said = run_command(cmd, &rc);
  EXPECT_EQ(rc, 0) << "python gguf reader: " << said;
  for (const auto& d : {adapter, out, hf}) fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MergeGguf, ::testing::Values("tiny_llama", "tiny_qwen3"));

TEST(MergeGgufErrors, HfBaseToGgufIsRefusedAndNothingIsWritten) {
  const std::string base = tmp("gg_hfbase"), adapter = tmp("gg_hfadapter"), out = tmp("gg_never") + ".gguf";
  auto c = model_preset("tiny-llama");
  ASSERT_TRUE(c.ok());
  InitModelOptions io;
  io.overwrite = true;
  ASSERT_TRUE(init_model(*c, base, io).ok());
  write_adapter(*c, some_targets(), adapter);
  auto r = merge_lora(base, adapter, out, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("needs a .gguf base"), std::string::npos) << r.status().to_string();
  EXPECT_FALSE(fs::exists(out));
  for (const auto& d : {base, adapter}) fs::remove_all(d);
}

}  // namespace
}  // namespace st
