#include "model/load.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/file.h"
#include "core/json.h"
#include "io/bnb4bit.h"
#include "io/gguf_checkpoint.h"
#include "io/safetensors.h"
#include "model/pack.h"

namespace st {
namespace {

class HfModelSource : public ModelSource {
 public:
  HfModelSource(std::string dir, ModelConfig c, Checkpoint ck) : dir_(std::move(dir)), c_(std::move(c)), ck_(std::move(ck)) {}
  const ModelConfig& config() const override { return c_; }
  std::string describe() const override { return "hf:" + dir_; }
  std::vector<std::string> files() const override {
    std::vector<std::string> f = {path_join(dir_, "config.json")};
    for (const std::string& s : ck_.files()) f.push_back(s);
    return f;
  }
  bool has(const std::string& name) const override { return ck_.has(name); }
  bool is_gguf() const override { return false; }
  std::string hf_dir() const override { return dir_; }
  // A bitsandbytes 4-bit checkpoint (io/bnb4bit.h) shows each quantized weight once, dequantized.
  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> out;
    for (std::string& n : ck_.tensor_names())
      if (!is_bnb4bit_aux(ck_, n)) out.push_back(std::move(n));
    return out;
  }
  StatusOr<std::pair<std::vector<int64_t>, DType>> info(const std::string& name) const override {
    return tensor_shape_dtype(ck_, name);
  }
  Status read(const std::string& name, const std::vector<int64_t>& shape, DType dt, void* dst) const override {
    return read_tensor_as(ck_, name, shape, dt, dst);
  }

 private:
  std::string dir_;
  ModelConfig c_;
  Checkpoint ck_;
};

class GgufModelSource : public ModelSource {
 public:
  explicit GgufModelSource(GgufCheckpoint g) : g_(std::move(g)) {}
  const ModelConfig& config() const override { return g_.config(); }
  std::string describe() const override { return g_.describe(); }
  std::vector<std::string> files() const override { return g_.files(); }
  bool has(const std::string& name) const override { return g_.has(name); }
  bool is_gguf() const override { return true; }
  std::string hf_dir() const override { return ""; }
  const GgufCheckpoint* gguf() const override { return &g_; }
  std::vector<std::string> tensor_names() const override { return g_.tensor_names(); }
  StatusOr<std::pair<std::vector<int64_t>, DType>> info(const std::string& name) const override {
    ASSIGN_OR_RETURN(auto shape, g_.shape(name));
    return std::make_pair(shape, DType::kBF16);
  }
  Status read(const std::string& name, const std::vector<int64_t>& shape, DType dt, void* dst) const override {
    return g_.read_tensor_as(name, shape, dt, dst);
  }

 private:
  GgufCheckpoint g_;
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

Status check_tensor(const ModelSource& src, const std::string& name, const std::vector<int64_t>& want) {
  ASSIGN_OR_RETURN(auto got, src.info(name), src.describe());
  if (got.first != want)
    return InvalidArgument(Str() << src.describe() << ": tensor '" << name << "' has shape " << shape_str(got.first)
                                 << ", the config implies " << shape_str(want));
  return Status::OK();
}

// Layers in the file past the config's num_hidden_layers are never read: transformers loads such a
// checkpoint too, with a warning, and so do we (a config cut to fewer layers is a legitimate
// experiment; a damaged one is not, and the user should see which it is).
void warn_unused_layers(const ModelSource& src) {
  const std::string prefix = "model.layers.";
  long long highest = -1;
  std::string example;
  for (const std::string& n : src.tensor_names()) {
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long long l = std::strtoll(n.c_str() + prefix.size(), &end, 10);
    if (end == n.c_str() + prefix.size() || *end != '.' || l < src.config().num_layers) continue;
    if (l > highest) highest = l, example = n;
  }
  if (highest < 0) return;
  const long long L = static_cast<long long>(src.config().num_layers);
  std::fprintf(stderr, "warning: %s has weights for layers 0..%lld, but its config says num_hidden_layers %lld: %s %lld%s%s not used (e.g. %s)\n",
               src.describe().c_str(), highest, L, highest > L ? "layers" : "layer", L,
               highest > L ? (".." + std::to_string(highest)).c_str() : "", highest > L ? " are" : " is", example.c_str());
}

// Note [config against weights]: every consumer sizes host and device buffers from the config
// (layer blobs, the pool, activations). A config that does not match its weights (a damaged file,
// a config.json from another model) must fail naming a tensor, from metadata only, before any of
// that is allocated; otherwise hidden_size 65536 over a 64-wide checkpoint ends in std::bad_alloc.
Status check_shapes(const ModelSource& src) {
  const ModelConfig& c = src.config();
  const LayerLayout layer = make_layer_layout(c, DType::kF32);  // shapes do not depend on the dtype
  for (int l = 0; l < c.num_layers; ++l)
    for (const LayerTensorSpec& s : layer.tensors)
      RETURN_IF_ERROR(check_tensor(src, layer_tensor_name(l, s), s.shape));
  for (const LayerTensorSpec& s : make_extras_layout(c, DType::kF32).tensors)
    RETURN_IF_ERROR(check_tensor(src, s.hf_suffix, s.shape));
  warn_unused_layers(src);
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<ModelSource>> open_hf_model_source(const std::string& dir) {
  ASSIGN_OR_RETURN(ModelConfig c, load_hf_config(path_join(dir, "config.json")));
  ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  std::unique_ptr<ModelSource> src(new HfModelSource(dir, std::move(c), std::move(ck)));
  RETURN_IF_ERROR(check_shapes(*src));
  return src;
}

StatusOr<std::unique_ptr<ModelSource>> open_gguf_model_source(const std::string& path) {
  ASSIGN_OR_RETURN(GgufCheckpoint g, GgufCheckpoint::open(path));
  std::unique_ptr<ModelSource> src(new GgufModelSource(std::move(g)));
  RETURN_IF_ERROR(check_shapes(*src));
  return src;
}

// A streamtune layer store given where a model is expected: it holds the weights but neither
// the tokenizer nor the files merge copies, and train / generate build (or reuse) a model's
// store in the cache from the model itself. Said plainly, naming the model it was built from, instead of
// "config.json: no such file".
Status refuse_layer_store(const std::string& dir) {
  const std::string manifest = path_join(dir, "manifest.json");
  if (file_exists(path_join(dir, "config.json")) || !file_exists(manifest)) return Status::OK();
  StatusOr<Json> j = read_json_file(manifest);
  if (!j.ok() || !j->is_object() || j->value("format", Json()) != Json("streamtune-layer-store")) return Status::OK();
  const Json src = j->value("source", Json());
  return InvalidArgument(Str() << dir << " is a streamtune layer store (written by `streamtune shard`), not a model: "
                               << "give the HF model directory or .gguf it was built from"
                               << (src.is_string() ? " (" + src.get<std::string>() + ")" : std::string())
                               << "; train and generate build or reuse its store in the cache themselves");
}

StatusOr<std::unique_ptr<ModelSource>> open_model_source(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    RETURN_IF_ERROR(refuse_layer_store(path));
    return open_hf_model_source(path);
  }
  if (ends_with(path, ".gguf")) return open_gguf_model_source(path);
  if (!std::filesystem::exists(path, ec)) return NotFound(Str() << "model " << path << " does not exist");
  return InvalidArgument(Str() << "model " << path << ": expected an HF checkpoint directory or a .gguf file");
}

Status pack_layer_from(const ModelSource& src, const LayerLayout& layout, int layer, void* host_blob) {
  RETURN_IF_ERROR(pack_layer_with(
                      [&](const std::string& name, const std::vector<int64_t>& shape, DType dt, void* dst) {
                        return src.read(name, shape, dt, dst);
                      },
                      layout, layer, host_blob),
                  "packing layer " << layer << " from " << src.describe());
  return Status::OK();
}

Status pack_extras_from(const ModelSource& src, const ExtrasLayout& layout, void* host_blob) {
  std::memset(host_blob, 0, layout.bytes);
  for (const LayerTensorSpec& s : layout.tensors) {
    char* dst = static_cast<char*>(host_blob) + s.offset;
    RETURN_IF_ERROR(src.read(s.hf_suffix, s.shape, layout.dtype, dst), "packing extras from " << src.describe());
    RETURN_IF_ERROR(check_finite_weight(s.hf_suffix, s.shape, layout.dtype, dst), "packing extras from " << src.describe());
  }
  return Status::OK();
}

LoadedModel::~LoadedModel() {
  if (extras_blob) be->free(extras_blob);
}

StatusOr<std::unique_ptr<LoadedModel>> load_model_resident(Backend* be, const ModelSource& src, DType dtype) {
  auto m = std::make_unique<LoadedModel>();
  m->be = be;
  m->config = src.config();
  const LayerLayout layout = make_layer_layout(m->config, dtype);
  const int L = static_cast<int>(m->config.num_layers);
  // All blobs are staged on the host first (from_host_blobs copies them in one go).
  std::vector<std::vector<char>> host(static_cast<size_t>(L));
  std::vector<const void*> ptrs;
  for (int l = 0; l < L; ++l) {
    host[l].resize(layout.bytes);
    RETURN_IF_ERROR(pack_layer_from(src, layout, l, host[l].data()));
    ptrs.push_back(host[l].data());
  }
  ASSIGN_OR_RETURN(m->layers, ResidentLayerSource::from_host_blobs(be, layout, ptrs));
  m->extras_layout = make_extras_layout(m->config, dtype);
  std::vector<char> eh(m->extras_layout.bytes);
  RETURN_IF_ERROR(pack_extras_from(src, m->extras_layout, eh.data()));
  ASSIGN_OR_RETURN(m->extras_blob, be->alloc(m->extras_layout.bytes), "extras of " << src.describe());
  be->copy_h2d(m->extras_blob, eh.data(), eh.size(), StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  m->extras = extras_weights_view(m->extras_layout, m->extras_blob, m->config.tie_word_embeddings);
  return m;
}

}  // namespace st
