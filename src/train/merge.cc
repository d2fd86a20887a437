#include "train/merge.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "data/model_tokenizer.h"
#include "io/gguf_checkpoint.h"
#include "io/gguf_write.h"
#include "model/load.h"
#include "model/lora.h"
#include "train/checkpoint.h"

namespace st {
namespace fs = std::filesystem;
namespace {

struct OutTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  uint64_t bytes;
};

// The adapted projection behind an HF weight name, if any: (layer, target).
std::optional<std::pair<int, LoraTarget>> lora_site(const std::string& name, const LoraConfig& lc, int layers) {
  for (int l = 0; l < layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    if (name.compare(0, pre.size(), pre) != 0) continue;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto tg = static_cast<LoraTarget>(t);
      if (lc.has(tg) && lc.on_layer(l) && name == pre + lora_target_module(tg) + ".weight") return std::make_pair(l, tg);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// W[out,in] += s * B[out,r] · A[r,in], f32, row by row (A's rows stream through cache).
void add_delta(float* w, const float* a, const float* b, int64_t out, int64_t in, int64_t r, float s) {
  for (int64_t i = 0; i < out; ++i) {
    float* wr = w + i * in;
    for (int64_t k = 0; k < r; ++k) {
      const float c = s * b[i * r + k];
      const float* ar = a + k * in;
      for (int64_t j = 0; j < in; ++j) wr[j] += c * ar[j];
    }
  }
}

// DoRA (model/layer.cc Note [DoRA]): W'[o,:] = (m[o] / ||W'[o,:]||) W'[o,:] for W' = W + s B A,
// as PEFT merges (the row norm in double, the factor rounded to f32 once).
void scale_rows_dora(float* w, const float* mag, int64_t out, int64_t in) {
  for (int64_t i = 0; i < out; ++i) {
    float* wr = w + i * in;
    double sq = 0.0;
    for (int64_t j = 0; j < in; ++j) sq += static_cast<double>(wr[j]) * wr[j];
    const float f = static_cast<float>(mag[i] / std::sqrt(sq));
    for (int64_t j = 0; j < in; ++j) wr[j] *= f;
  }
}

// Greedy split of the tensors (in order) into shards of at most max_bytes.
std::vector<std::vector<size_t>> plan_shards(const std::vector<OutTensor>& ts, uint64_t max_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t cur = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!shards.back().empty() && cur + ts[i].bytes > max_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(i);
    cur += ts[i].bytes;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  if (n == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

struct MergeCtx {
  const ModelSource* src;
  const LoraConfig* lc;
  const Lora* lora;
  const std::vector<float>* params;
  std::string adapter_dir;
  int64_t merged = 0;
};

// Reads one tensor (merged when it is a LoRA target) into `buf` in its output dtype.
Status produce(MergeCtx& m, const OutTensor& t, std::vector<char>* buf) {
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  std::vector<float> f(static_cast<size_t>(numel));
  RETURN_IF_ERROR(m.src->read(t.name, t.shape, DType::kF32, f.data()));
  const auto site = lora_site(t.name, *m.lc, static_cast<int>(m.src->config().num_layers));
  if (site) {
    const auto [in, out] = lora_target_dims(m.src->config(), site->second);
    if (t.shape.size() != 2 || t.shape[0] != out || t.shape[1] != in) {
      return InvalidArgument(Str() << "merge: " << t.name << " has shape " << t.shape.size() << "-d, expected ["
                                   << out << ", " << in << "]");
    }
    const float* p = m.params->data();
    add_delta(f.data(), p + m.lora->offset_a(site->first, site->second), p + m.lora->offset_b(site->first, site->second),
              out, in, m.lc->r, m.lc->scaling());
    if (m.lc->dora) scale_rows_dora(f.data(), p + m.lora->offset_mag(site->first, site->second), out, in);
    ++m.merged;
  }
  buf->resize(t.bytes);
  convert_elements(buf->data(), t.dtype, f.data(), DType::kF32, static_cast<size_t>(numel));
  return Status::OK();
}

Status write_index(const std::string& dir, const std::vector<OutTensor>& ts,
                   const std::vector<std::vector<size_t>>& shards, uint64_t total) {
  Json map = Json::object();
  for (size_t s = 0; s < shards.size(); ++s)
    for (size_t i : shards[s]) map[ts[i].name] = shard_name(s, shards.size());
  Json j = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  return write_file_atomic(path_join(dir, "model.safetensors.index.json"), j.dump(2) + "\n");
}

// A GGUF base has no tokenizer files to copy: they are written from its vocabulary, as the HF
// tokenizer it was converted from has them (data/detail/tokenizer_export.cc). A vocabulary we
// cannot express is a note, not a failed merge: the weights are what was asked for.
Status write_gguf_tokenizer(const GgufCheckpoint& ck, const std::string& dir, MergeResult* r) {
  StatusOr<HfTokenizerFiles> t = gguf_hf_tokenizer_files(ck.file());
  if (!t.ok()) {
    r->notes.push_back("no tokenizer files written: " + t.status().message());
    return Status::OK();
  }
  RETURN_IF_ERROR(write_file_atomic(path_join(dir, "tokenizer.json"), t->tokenizer_json));
  return write_file_atomic(path_join(dir, "tokenizer_config.json"), t->tokenizer_config_json);
}

// Note [the adapter's tokenizer]: `train` saves the tokenizer beside the adapter with the chat
// template it trained with (train/train_data.h save_train_tokenizer); the merged model takes those
// files (a checkpoint-N adapter: its output_dir's), so that it renders conversations as they were
// trained. An adapter without them (PEFT's own, or older) leaves the base's.
Status write_side_files(const ModelSource& src, const std::string& adapter_dir, const std::string& dir,
                        const std::vector<OutTensor>& ts, MergeResult* r) {
  ModelConfig c = src.config();
  DType d0 = ts.empty() ? DType::kBF16 : ts.front().dtype;
  c.torch_dtype = d0 == DType::kF32 ? "float32" : d0 == DType::kF16 ? "float16" : "bfloat16";
  RETURN_IF_ERROR(write_file_atomic(path_join(dir, "config.json"), hf_config_to_json(c).dump(2) + "\n"));
  const std::string saved = saved_tokenizer_dir(adapter_dir);
  if (!saved.empty()) {
    RETURN_IF_ERROR(save_model_tokenizer(saved, dir).status(), "merge: the adapter's tokenizer");
    r->notes.push_back("tokenizer files: the adapter's (" + saved + "), with the chat template it was trained with");
  } else if (src.gguf()) {
    return write_gguf_tokenizer(*src.gguf(), dir, r);
  } else {  // the base's tokenizer files, chat_template.jinja and additional_chat_templates/ with them
    RETURN_IF_ERROR(save_model_tokenizer(src.hf_dir(), dir).status(), "merge: the base's tokenizer");
  }
  if (src.gguf()) return Status::OK();
  const std::string gen = path_join(src.hf_dir(), "generation_config.json");
  if (!file_exists(gen)) return Status::OK();
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(gen));
  return write_file_atomic(path_join(dir, "generation_config.json"), text);
}

StatusOr<std::vector<OutTensor>> list_outputs(const ModelSource& src, const MergeOptions& o) {
  std::vector<OutTensor> ts;
  for (const std::string& name : src.tensor_names()) {
    ASSIGN_OR_RETURN(auto inf, src.info(name));
    DType dt = o.dtype.value_or(inf.second);
    if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) dt = DType::kBF16;
    uint64_t n = 1;
    for (int64_t d : inf.first) n *= static_cast<uint64_t>(d);
    ts.push_back({name, inf.first, dt, n * dtype_size(dt)});
  }
  return ts;
}

Status write_all(MergeCtx& m, const std::string& tmp, const std::vector<OutTensor>& ts, const MergeOptions& o,
                 MergeResult* r) {
  const auto shards = plan_shards(ts, o.max_shard_bytes);
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<std::vector<char>> bufs(shards[s].size());
    std::vector<TensorToWrite> w;
    for (size_t k = 0; k < shards[s].size(); ++k) {
      const OutTensor& t = ts[shards[s][k]];
      RETURN_IF_ERROR(produce(m, t, &bufs[k]));
      w.push_back({t.name, t.dtype, t.shape, bufs[k].data()});
      r->bytes += t.bytes;
    }
    const std::string name = shard_name(s, shards.size());
    RETURN_IF_ERROR(write_safetensors(path_join(tmp, name), w, {{"format", "pt"}}));
    r->files.push_back(name);
  }
  if (shards.size() > 1) RETURN_IF_ERROR(write_index(tmp, ts, shards, r->bytes));
  return write_side_files(*m.src, m.adapter_dir, tmp, ts, r);
}

// Note [GGUF merge]: a GGUF base merged into a GGUF: every metadata key (tokenizer, chat
// template, hyper-parameters) copied as it is, every tensor the adapter does not touch copied byte
// for byte in its own type (a Q4_K base stays Q4_K there), and each adapted projection written in
// `dtype` (F16 unless asked otherwise), merged in f32 in HF row order and put back in GGUF row
// order (llama's permuted q/k rows). llama.cpp loads mixed tensor types; `llama-quantize` can
// requantize the result.
Status write_gguf_merge(const GgufCheckpoint& ck, const MergeCtx& m, DType dtype, const std::string& out,
                        int64_t expect, MergeResult* r, int64_t* merged) {
  const GgufFile& f = ck.file();
  std::vector<std::pair<std::string, GgufValue>> kv;
  for (const std::string& k : f.keys()) kv.emplace_back(k, *f.find(k));
  // Note [the adapter's tokenizer]: the template the adapter was trained with, when `train` saved
  // one beside it, is the merged file's tokenizer.chat_template (llama.cpp / ollama render with it).
  std::string trained_template;  // outlives kv, whose string values are views
  const std::string saved = saved_tokenizer_dir(m.adapter_dir);
  if (!saved.empty()) {
    ASSIGN_OR_RETURN(DirChatTemplate t, read_dir_chat_template(saved), "merge: the adapter's tokenizer");
    trained_template = std::move(t.text);
  }
  if (!trained_template.empty()) {
    GgufValue v;
    v.type = GgufValueType::kString;
    v.str = trained_template;
    auto it = std::find_if(kv.begin(), kv.end(), [](const auto& e) { return e.first == "tokenizer.chat_template"; });
    if (it != kv.end()) it->second = v;
    else kv.emplace_back("tokenizer.chat_template", v);
    r->notes.push_back("tokenizer.chat_template: the one the adapter was trained with (" + saved + ")");
  }
  const GgmlType out_type = dtype == DType::kF32 ? GgmlType::kF32 : dtype == DType::kF16 ? GgmlType::kF16 : GgmlType::kBF16;
  const int layers = static_cast<int>(ck.config().num_layers);
  std::vector<GgufOutTensor> ts;
  std::vector<std::string> hf(f.tensors().size());
  std::vector<std::optional<std::pair<int, LoraTarget>>> sites(f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    if (auto h = gguf_to_hf_name(t.name); h.ok()) hf[i] = *h;
    sites[i] = hf[i].empty() ? std::nullopt : lora_site(hf[i], *m.lc, layers);
    GgufOutTensor o{t.name, t.type, t.ne, t.nbytes};
    if (sites[i]) {
      o.type = out_type;
      ASSIGN_OR_RETURN(o.nbytes, ggml_nbytes(out_type, t.ne));
    }
    ts.push_back(std::move(o));
  }
  const int64_t planned = std::count_if(sites.begin(), sites.end(), [](const auto& x) { return x.has_value(); });
  if (planned != expect)  // before anything is written: an existing --out stays as it was
    return InvalidArgument(Str() << "merge: " << ck.path() << " has " << planned
                                 << " of the adapter's projections, the adapter has " << expect);
  auto fill = [&](size_t i, std::vector<uint8_t>* buf) -> Status {
    const GgufTensorInfo& t = f.tensors()[i];
    if (!sites[i]) {
      buf->assign(f.data(t), f.data(t) + t.nbytes);
      return Status::OK();
    }
    const auto [in, outd] = lora_target_dims(ck.config(), sites[i]->second);
    std::vector<float> w(static_cast<size_t>(in * outd));
    RETURN_IF_ERROR(ck.read_tensor_as(hf[i], {outd, in}, DType::kF32, w.data()));
    const float* p = m.params->data();
    add_delta(w.data(), p + m.lora->offset_a(sites[i]->first, sites[i]->second),
              p + m.lora->offset_b(sites[i]->first, sites[i]->second), outd, in, m.lc->r, m.lc->scaling());
    if (m.lc->dora) scale_rows_dora(w.data(), p + m.lora->offset_mag(sites[i]->first, sites[i]->second), outd, in);
    if (const int64_t heads = ck.permuted_heads(hf[i]); heads > 0) {
      const int64_t D = ck.config().head_dim;
      std::vector<float> g(w.size());
      for (int64_t row = 0; row < outd; ++row)
        std::copy_n(w.data() + row * in, in, g.data() + gguf_row_of_hf_row(row, D) * in);
      w.swap(g);
    }
    buf->resize(ts[i].nbytes);
    convert_elements(buf->data(), dtype, w.data(), DType::kF32, w.size());
    ++*merged;
    return Status::OK();
  };
  RETURN_IF_ERROR(write_gguf(out, kv, f.alignment(), ts, fill));
  for (const GgufOutTensor& t : ts) r->bytes += t.nbytes;
  r->files.push_back(path_basename(out));
  return Status::OK();
}

bool gguf_out(const std::string& path) { return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0; }

}  // namespace

StatusOr<MergeResult> merge_lora(const std::string& model_path, const std::string& adapter_dir,
                                 const std::string& out_dir, const MergeOptions& opts) {
  std::error_code ec;
  ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, open_model_source(model_path));
  // --force replaces --out, never an input (session 22 audit: `--out` equal to --model deleted the
  // model once the merge had read it), and never turns a file into a directory or back.
  for (const std::string& f : src->files())
    if (path_is_within(f, out_dir))
      return InvalidArgument(Str() << "merge: --out " << out_dir << " would replace the base model (" << f << ")");
  if (path_is_within(adapter_dir, out_dir) || path_is_within(out_dir, adapter_dir))
    return InvalidArgument(Str() << "merge: --out " << out_dir << " would overwrite the adapter (" << adapter_dir
                                 << "); write the merged model elsewhere");
  if (fs::exists(out_dir, ec)) {
    if (!opts.overwrite)
      return InvalidArgument(Str() << "merge: " << out_dir << " already exists (use --force to replace it)");
    if (fs::is_directory(out_dir, ec) == gguf_out(out_dir))
      return InvalidArgument(Str() << "merge: " << out_dir << " exists and is a "
                                   << (gguf_out(out_dir) ? "directory" : "file") << "; --force replaces only a "
                                   << (gguf_out(out_dir) ? ".gguf file" : "merged model directory"));
  }
  ASSIGN_OR_RETURN(LoraConfig lc, read_peft_config(adapter_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, make_backend(DeviceKind::kCpu));
  ASSIGN_OR_RETURN(std::unique_ptr<Lora> lora, Lora::create(cpu.get(), src->config(), lc),
                   "merge: " << path_join(adapter_dir, "adapter_config.json"));
  RETURN_IF_ERROR(lora->load_peft(adapter_dir), "merge: adapter " << adapter_dir);
  const std::vector<float> params = lora->params_to_host();
  if (gguf_out(out_dir)) {
    if (!src->gguf())
      return InvalidArgument(Str() << "merge: a .gguf output needs a .gguf base (" << model_path
                                   << " is an HF checkpoint: merge to a directory, then convert it with llama.cpp's "
                                      "convert_hf_to_gguf.py)");
    MergeCtx m{src.get(), &lc, lora.get(), &params, adapter_dir};
    MergeResult r;
    int64_t expect = 0;
    for (bool b : lc.targets) expect += b ? lc.adapted_layers(src->config().num_layers) : 0;
    RETURN_IF_ERROR(write_gguf_merge(*src->gguf(), m, opts.dtype.value_or(DType::kF16), out_dir, expect, &r, &r.merged));
    return r;
  }
  ASSIGN_OR_RETURN(std::vector<OutTensor> ts, list_outputs(*src, opts));

  const std::string tmp = out_dir + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  RETURN_IF_ERROR(make_dirs(tmp));
  MergeCtx m{src.get(), &lc, lora.get(), &params, adapter_dir};
  MergeResult r;
  Status st = write_all(m, tmp, ts, opts, &r);
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  r.merged = m.merged;
  int64_t expect = 0;
  for (bool b : lc.targets) expect += b ? lc.adapted_layers(src->config().num_layers) : 0;
  if (r.merged != expect) {
    fs::remove_all(tmp, ec);
    return InvalidArgument(Str() << "merge: merged " << r.merged << " projections, the adapter has " << expect);
  }
  // The old output is renamed aside, not deleted, until the new one is in place.
  const std::string old = out_dir + ".old-" + std::to_string(::getpid());
  const bool replacing = fs::exists(out_dir, ec);
  if (replacing) {
    fs::rename(out_dir, old, ec);
    if (ec) return IOError(Str() << "merge: moving the old " << out_dir << " aside: " << ec.message());
  }
  fs::rename(tmp, out_dir, ec);
  if (ec) {
    const std::string why = ec.message();
    if (replacing) fs::rename(old, out_dir, ec);
    return IOError(Str() << "merge: renaming " << tmp << " to " << out_dir << ": " << why);
  }
  if (replacing) fs::remove_all(old, ec);
  return r;
}

}  // namespace st
