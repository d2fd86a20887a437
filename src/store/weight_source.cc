#include "store/weight_source.h"

#include "core/file.h"
#include "io/gguf_checkpoint.h"
#include "io/safetensors.h"

namespace st {
namespace {

class HfSource : public WeightSource {
 public:
  HfSource(std::string dir, ModelConfig c, Checkpoint ck)
      : dir_(std::move(dir)), config_(std::move(c)), ck_(std::move(ck)) {}

  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> files() const override {
    std::vector<std::string> f = {path_join(dir_, "config.json")};
    for (const std::string& s : ck_.files()) f.push_back(s);
    return f;
  }
  std::string describe() const override { return "hf:" + dir_; }
  bool has(const std::string& name) const override { return ck_.has(name); }
  Status read_tensor_as(const std::string& name, const std::vector<int64_t>& shape, DType dst_dtype,
                        void* dst) const override {
    return st::read_tensor_as(ck_, name, shape, dst_dtype, dst);
  }

 private:
  std::string dir_;
  ModelConfig config_;
  Checkpoint ck_;
};

class GgufSource : public WeightSource {
 public:
  explicit GgufSource(GgufCheckpoint ck) : ck_(std::move(ck)) {}
  const ModelConfig& config() const override { return ck_.config(); }
  std::vector<std::string> files() const override { return ck_.files(); }
  std::string describe() const override { return ck_.describe(); }
  bool has(const std::string& name) const override { return ck_.has(name); }
  Status read_tensor_as(const std::string& name, const std::vector<int64_t>& shape, DType dst_dtype,
                        void* dst) const override {
    return ck_.read_tensor_as(name, shape, dst_dtype, dst);
  }

 private:
  GgufCheckpoint ck_;
};

}  // namespace

StatusOr<std::unique_ptr<WeightSource>> open_gguf_source(const std::string& path) {
  ASSIGN_OR_RETURN(GgufCheckpoint ck, GgufCheckpoint::open(path));
  return std::unique_ptr<WeightSource>(new GgufSource(std::move(ck)));
}

StatusOr<std::unique_ptr<WeightSource>> open_weight_source(const std::string& path) {
  if (is_directory(path)) return open_hf_source(path);
  if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf" && file_exists(path)) return open_gguf_source(path);
  return NotFound("model '" + path + "' is neither a checkpoint directory nor a .gguf file");
}

StatusOr<std::unique_ptr<WeightSource>> open_hf_source(const std::string& dir) {
  ASSIGN_OR_RETURN(ModelConfig c, load_hf_config(path_join(dir, "config.json")));
  ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  return std::unique_ptr<WeightSource>(new HfSource(dir, std::move(c), std::move(ck)));
}

}  // namespace st
