// Sharder: layer files are the packed layer blobs (oracle: model/pack.h on the source checkpoint),
// strict safetensors, cached by fingerprint + dtype, atomic under interruption.
#include "store/sharder.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/file.h"
#include "io/safetensors.h"
#include "model/load.h"
#include "model/pack.h"
#include "store/manifest.h"
#include "store_test_util.h"

namespace st {
namespace {

using testing_util::TempDir;
namespace fs = std::filesystem;

std::vector<char> file_bytes(const std::string& path) {
  StatusOr<std::string> s = read_file_to_string(path);
  CHECK_OK(s.status());
  return std::vector<char>(s->begin(), s->end());
}

TEST(Sharder, LayerFilesAreThePackedBlobsAndStrictSafetensors) {
  TempDir t;
  ModelConfig c = testing_util::tiny_config(3);
  testing_util::write_model(c, t.sub("model"));
  ShardResult r = testing_util::shard_or_die(t.sub("model"), t.sub("store"));
  EXPECT_FALSE(r.reused);
  StatusOr<Checkpoint> ck = Checkpoint::open(t.sub("model"));
  ASSERT_TRUE(ck.ok());
  EXPECT_GT(ck->files().size(), 1u);  // multi-shard source
  LayerLayout layout = make_layer_layout(c, DType::kBF16);
  std::vector<char> want(layout.bytes);
  for (int l = 0; l < 3; ++l) {
    ASSERT_TRUE(pack_layer(*ck, layout, l, want.data()).ok());
    const StoreFile& f = r.manifest.layers[l];
    std::vector<char> got = file_bytes(t.sub("store/" + f.name));
    ASSERT_EQ(got.size(), f.data_start + layout.bytes);
    EXPECT_EQ(f.data_start % kStoreIoAlign, 0u);
    EXPECT_EQ(0, std::memcmp(got.data() + f.data_start, want.data(), layout.bytes)) << "layer " << l;
    StatusOr<SafetensorsFile> sf = SafetensorsFile::open(t.sub("store/" + f.name));
    ASSERT_TRUE(sf.ok()) << sf.status().to_string();
    for (const LayerTensorSpec& s : layout.tensors) {
      const TensorInfo* ti = sf->find(layer_tensor_name(l, s));
      ASSERT_NE(ti, nullptr);
      EXPECT_EQ(ti->offset, s.offset);
    }
  }
  ExtrasLayout el = make_extras_layout(c, DType::kBF16);
  std::vector<char> ewant(el.bytes);
  ASSERT_TRUE(pack_extras(*ck, el, ewant.data()).ok());
  std::vector<char> egot = file_bytes(t.sub("store/extras.safetensors"));
  EXPECT_EQ(0, std::memcmp(egot.data() + r.manifest.extras.data_start, ewant.data(), el.bytes));
  StatusOr<StoreManifest> m = open_store_manifest(t.sub("store"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->num_layers, 3);
  EXPECT_EQ(m->layer_bytes, layout.bytes);
  EXPECT_EQ(m->config.hidden_size, c.hidden_size);
}

TEST(Sharder, ReusesUpToDateStoreRebuildsOnTouchedSourceAndDtype) {
  TempDir t;
  ModelConfig c = testing_util::tiny_config(2);
  testing_util::write_model(c, t.sub("model"));
  ShardOptions o;
  o.cache_dir = t.sub("cache");
  StatusOr<ShardResult> a = shard_model_path(t.sub("model"), o);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_FALSE(a->reused);
  EXPECT_EQ(a->dir.rfind(t.sub("cache/stores/"), 0), 0u);
  EXPECT_NE(a->dir.find("-bfloat16"), std::string::npos);
  StatusOr<ShardResult> b = shard_model_path(t.sub("model"), o);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->reused) << b->reason;
  EXPECT_EQ(a->dir, b->dir);

  // Same out dir, other dtype: rebuilt in place.
  ShardOptions fixed;
  fixed.out_dir = a->dir;
  fixed.dtype = DType::kF32;
  StatusOr<ShardResult> d = shard_model_path(t.sub("model"), fixed);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->reused);
  EXPECT_NE(d->reason.find("dtype changed"), std::string::npos) << d->reason;
  EXPECT_EQ(d->manifest.dtype, DType::kF32);
  EXPECT_EQ(open_store_manifest(a->dir)->dtype, DType::kF32);

  // Touch a source file (mtime only): rebuilt.
  StatusOr<Checkpoint> ck = Checkpoint::open(t.sub("model"));
  ASSERT_TRUE(ck.ok());
  struct timespec ts[2] = {{0, UTIME_NOW}, {12345, 0}};
  ASSERT_EQ(0, ::utimensat(AT_FDCWD, ck->files()[0].c_str(), ts, 0));
  StatusOr<ShardResult> e = shard_model_path(t.sub("model"), fixed);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->reused);
  EXPECT_NE(e->reason.find("source changed"), std::string::npos) << e->reason;
  StatusOr<ShardResult> f = shard_model_path(t.sub("model"), fixed);
  EXPECT_TRUE(f->reused);
}

// A ModelSource that fails partway: the sharder is "interrupted".
class FailingSource : public ModelSource {
 public:
  FailingSource(std::unique_ptr<ModelSource> s, std::string fail) : s_(std::move(s)), fail_(std::move(fail)) {}
  const ModelConfig& config() const override { return s_->config(); }
  std::string describe() const override { return s_->describe(); }
  std::vector<std::string> files() const override { return s_->files(); }
  bool has(const std::string& n) const override { return s_->has(n); }
  bool is_gguf() const override { return s_->is_gguf(); }
  std::string hf_dir() const override { return s_->hf_dir(); }
  std::vector<std::string> tensor_names() const override { return s_->tensor_names(); }
  StatusOr<std::pair<std::vector<int64_t>, DType>> info(const std::string& n) const override { return s_->info(n); }
  Status read(const std::string& n, const std::vector<int64_t>& shape, DType dt, void* dst) const override {
    if (n.find(fail_) != std::string::npos) return IOError("injected failure reading " + n);
    return s_->read(n, shape, dt, dst);
  }

 private:
  std::unique_ptr<ModelSource> s_;
  std::string fail_;
};

TEST(Sharder, InterruptedShardNeverLooksLikeAStore) {
  TempDir t;
  ModelConfig c = testing_util::tiny_config(3);
  testing_util::write_model(c, t.sub("model"));
  std::string out = t.sub("store");
  // Leftovers of an interrupted run: a marked temp dir of a dead process.
  ASSERT_TRUE(make_dirs(out + ".tmp.999999999").ok());
  ASSERT_TRUE(write_file_atomic(out + ".tmp.999999999/layer_000.safetensors", "junk").ok());
  ASSERT_TRUE(write_file_atomic(out + ".tmp.999999999/.streamtune-scratch", "").ok());
  EXPECT_EQ(open_store_manifest(out + ".tmp.999999999").status().code(), StatusCode::kNotFound);

  // A failing shard leaves no store and no temp dir behind.
  ShardOptions o;
  o.out_dir = out;
  StatusOr<std::unique_ptr<ModelSource>> src = open_hf_model_source(t.sub("model"));
  ASSERT_TRUE(src.ok());
  FailingSource bad(std::move(*src), "model.layers.2.");
  StatusOr<ShardResult> r = shard_model(bad, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("injected failure"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(open_store_manifest(out).status().code(), StatusCode::kNotFound);

  ShardResult ok = testing_util::shard_or_die(t.sub("model"), out);
  EXPECT_FALSE(ok.reused);
  EXPECT_TRUE(open_store_manifest(out).ok());
  for (const auto& e : fs::directory_iterator(t.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_FALSE(fs::exists(out + "/.streamtune-scratch"));  // the installed store is not scratch

  // Replacing it (--force) retires the old store and leaves no scratch sibling.
  o.force = true;
  ASSERT_TRUE(shard_model_path(t.sub("model"), o).ok());
  EXPECT_TRUE(open_store_manifest(out).ok());
  for (const auto& e : fs::directory_iterator(t.path))
    EXPECT_EQ(e.path().filename().string().find(".old."), std::string::npos) << e.path();
}

// Session 22 audit: `shard --out DIR` used to delete whatever DIR held (the source model too), and
// any sibling named "DIR.old.<dead pid>". Only an empty directory or an earlier store is replaced.
TEST(Sharder, NeverReplacesWhatIsNotAStore) {
  TempDir t;
  ModelConfig c = testing_util::tiny_config(2);
  testing_util::write_model(c, t.sub("model"));
  const std::string user = t.sub("mine");
  ASSERT_TRUE(make_dirs(user).ok());
  ASSERT_TRUE(write_file_atomic(user + "/notes.txt", "keep me").ok());
  const std::string sibling = user + ".old.999999999";  // a user's dir that looks like a leftover
  ASSERT_TRUE(make_dirs(sibling).ok());
  ASSERT_TRUE(write_file_atomic(sibling + "/notes.txt", "keep me too").ok());
  ASSERT_TRUE(write_file_atomic(t.sub("plain_file"), "a file").ok());
  const std::string webapp = t.sub("webapp");  // a manifest.json that is not a store's
  ASSERT_TRUE(make_dirs(webapp).ok());
  ASSERT_TRUE(write_file_atomic(webapp + "/manifest.json", "{\"name\": \"pwa\"}").ok());

  auto shard_to = [&](const std::string& out) {
    ShardOptions o;
    o.out_dir = out;
    o.force = true;
    return shard_model_path(t.sub("model"), o);
  };
  for (const auto& [out, says] : std::vector<std::pair<std::string, std::string>>{
           {user, "is not a streamtune store"},
           {webapp, "is not a streamtune store"},
           {t.sub("model"), "holds the source model"},
           {t.sub("model") + "/", "holds the source model"},
           {t.path, "holds the source model"},
           {t.sub("plain_file"), "is not a directory"}}) {
    StatusOr<ShardResult> r = shard_to(out);
    ASSERT_FALSE(r.ok()) << out;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << out;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().to_string();
  }
  EXPECT_EQ(*read_file_to_string(user + "/notes.txt"), "keep me");
  EXPECT_EQ(*read_file_to_string(sibling + "/notes.txt"), "keep me too");
  EXPECT_EQ(*read_file_to_string(t.sub("plain_file")), "a file");
  EXPECT_EQ(*read_file_to_string(webapp + "/manifest.json"), "{\"name\": \"pwa\"}");
  EXPECT_TRUE(open_hf_model_source(t.sub("model")).ok());

  // An empty directory is taken; the user's look-alike sibling survives a successful shard.
  const std::string empty = t.sub("empty");
  ASSERT_TRUE(make_dirs(empty).ok());
  ASSERT_TRUE(shard_to(empty).ok());
  EXPECT_TRUE(open_store_manifest(empty).ok());
  ASSERT_TRUE(make_dirs(empty + ".old.999999999").ok());
  ASSERT_TRUE(write_file_atomic(empty + ".old.999999999/notes.txt", "mine").ok());
  ASSERT_TRUE(shard_to(empty).ok());
  EXPECT_EQ(*read_file_to_string(empty + ".old.999999999/notes.txt"), "mine");
}

// Note [config against weights]: a config that does not match its tensors fails when the source
// is opened, naming a tensor (before any buffer is sized from the config: hidden_size 65536 over a
// 64-wide checkpoint used to end in std::bad_alloc), and a size past any real model names its key.
TEST(ModelSource, ConfigThatDoesNotMatchItsWeightsIsRefusedByName) {
  TempDir t;
  ModelConfig c = testing_util::tiny_config(2);
  testing_util::write_model(c, t.sub("model"));
  ASSERT_TRUE(open_hf_model_source(t.sub("model")).ok());
  const std::string cfg = t.sub("model") + "/config.json";
  auto write_cfg = [&](const ModelConfig& m) {
    ASSERT_TRUE(write_file_atomic(cfg, hf_config_to_json(m).dump()).ok());
  };
  ModelConfig wide = c;
  wide.hidden_size = 65536;
  wide.head_dim = c.head_dim;
  write_cfg(wide);
  Status s = open_hf_model_source(t.sub("model")).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("config implies"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("model.layers.0."), std::string::npos) << s.to_string();

  ModelConfig deep = c;
  deep.num_layers = 4000;
  write_cfg(deep);
  s = open_hf_model_source(t.sub("model")).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.2."), std::string::npos) << s.to_string();

  ModelConfig huge = c;
  huge.intermediate_size = int64_t{1} << 40;
  write_cfg(huge);
  s = open_hf_model_source(t.sub("model")).status();
  EXPECT_NE(s.message().find("intermediate_size"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("beyond any supported model"), std::string::npos) << s.to_string();

  write_cfg(c);
  EXPECT_TRUE(open_hf_model_source(t.sub("model")).ok());
}

// Note [finite base weights]: a NaN or infinity in a base tensor is refused when it is packed --
// by the sharder and by the resident load -- naming the tensor and the element.
TEST(ModelSource, NonFiniteBaseWeightIsRefusedNamingTheTensor) {
  for (const auto& [tensor, value] : {std::pair{std::string("model.layers.1.mlp.down_proj.weight"), NAN},
                                      {std::string("model.norm.weight"), INFINITY},
                                      {std::string("model.embed_tokens.weight"), -INFINITY}}) {
    TempDir t;
    testing_util::write_model(testing_util::tiny_config(2), t.sub("model"));
    auto ck = Checkpoint::open(t.sub("model"));
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto found = ck->find(tensor);
    ASSERT_TRUE(found.ok()) << found.status().to_string();
    const std::string file = found->first->path();
    const uint64_t at = found->first->data_start() + found->second->offset + 5 * sizeof(float);  // element 5 (f32)
    std::string bytes = *read_file_to_string(file);
    const float v = value;
    std::memcpy(bytes.data() + at, &v, sizeof v);
    ASSERT_TRUE(write_file_atomic(file, bytes).ok());
    for (int path = 0; path < 2; ++path) {
      Status s;
      if (path == 0) {
        ShardOptions o;
        o.out_dir = t.sub("store");
        s = shard_model_path(t.sub("model"), o).status();
      } else {
        auto src = open_model_source(t.sub("model"));
        ASSERT_TRUE(src.ok()) << src.status().to_string();
        auto be = make_backend(DeviceKind::kCpu).value();
        s = load_model_resident(be.get(), **src, DType::kBF16).status();
      }
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
      EXPECT_NE(s.message().find(tensor + ": element 5"), std::string::npos) << s.to_string();
      EXPECT_NE(s.message().find("non-finite base weight"), std::string::npos) << s.to_string();
    }
    EXPECT_FALSE(std::filesystem::exists(t.sub("store") + "/manifest.json"));
  }
}

}  // namespace
}  // namespace st
