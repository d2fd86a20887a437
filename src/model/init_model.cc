#include "model/init_model.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>

#include "core/file.h"
#include "core/json.h"

namespace st {

int64_t HfTensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<HfTensorSpec> hf_tensor_list(const ModelConfig& c) {
  using Init = HfTensorSpec::Init;
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.q_dim(), KVD = c.kv_dim(), D = c.head_dim;
  std::vector<HfTensorSpec> t;
  t.push_back({"model.embed_tokens.weight", {V, H}});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = Str() << "model.layers." << l << ".";
    t.push_back({p + "input_layernorm.weight", {H}, Init::kOnes});
    t.push_back({p + "self_attn.q_proj.weight", {QD, H}});
    t.push_back({p + "self_attn.k_proj.weight", {KVD, H}});
    t.push_back({p + "self_attn.v_proj.weight", {KVD, H}});
    if (c.attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {QD}});
      t.push_back({p + "self_attn.k_proj.bias", {KVD}});
      t.push_back({p + "self_attn.v_proj.bias", {KVD}});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {D}, Init::kOnes});
      t.push_back({p + "self_attn.k_norm.weight", {D}, Init::kOnes});
    }
    t.push_back({p + "self_attn.o_proj.weight", {H, QD}});
    if (c.o_proj_bias) t.push_back({p + "self_attn.o_proj.bias", {H}});
    t.push_back({p + "post_attention_layernorm.weight", {H}, Init::kOnes});
    t.push_back({p + "mlp.gate_proj.weight", {F, H}});
    t.push_back({p + "mlp.up_proj.weight", {F, H}});
    t.push_back({p + "mlp.down_proj.weight", {H, F}});
  }
  t.push_back({"model.norm.weight", {H}, Init::kOnes});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}});
  return t;
}

namespace {

// Two of these are alive while writing (one filling, one being written).
constexpr size_t kInitChunkBytes = size_t{64} << 20;
// Work unit of the parallel fill (elements); small enough to balance, big enough to amortise.
constexpr uint64_t kFillItemElems = uint64_t{1} << 18;

uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return mix64(seed ^ mix64(h));
}

// Box-Muller on one 64-bit hash of (key, pair index): two standard normals.
inline void normal_pair(uint64_t key, uint64_t pair, float* z0, float* z1) {
  const uint64_t h = mix64(key + pair * 0xD1B54A32D192ED03ull);
  const float u1 = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
  const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * (1.0f / 16777216.0f);
  const float r = std::sqrt(-2.0f * std::log(u1));
  const float t = 6.28318530718f * u2;
  *z0 = r * std::cos(t);
  *z1 = r * std::sin(t);
}

void gen_values(const HfTensorSpec& spec, uint64_t key, float stdv, uint64_t first, uint64_t n,
                float* out) {
  if (spec.init == HfTensorSpec::Init::kOnes) {
    std::fill(out, out + n, 1.0f);
    return;
  }
  uint64_t i = first;
  const uint64_t end = first + n;
  float a, b;
  if (i < end && (i & 1)) {
    normal_pair(key, i >> 1, &a, &b);
    *out++ = b * stdv;
    ++i;
  }
  for (; i + 1 < end; i += 2, out += 2) {
    normal_pair(key, i >> 1, &a, &b);
    out[0] = a * stdv;
    out[1] = b * stdv;
  }
  if (i < end) {
    normal_pair(key, i >> 1, &a, &b);
    *out = a * stdv;
  }
}

// A run of elements of one tensor that lands at `dst` in the current buffer.
struct FillItem {
  const HfTensorSpec* spec;
  uint64_t key;
  uint64_t first, n;
  uint8_t* dst;
};

void run_fill_item(const FillItem& it, float stdv, DType dtype) {
  constexpr uint64_t kBlock = 4096;
  float tmp[kBlock];
  const size_t esz = dtype_size(dtype);
  for (uint64_t done = 0; done < it.n; done += kBlock) {
    const uint64_t m = std::min(kBlock, it.n - done);
    gen_values(*it.spec, it.key, stdv, it.first + done, m, tmp);
    convert_elements(it.dst + done * esz, dtype, tmp, DType::kF32, m);
  }
}

void parallel_fill(const std::vector<FillItem>& items, float stdv, DType dtype, int threads) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < items.size();) run_fill_item(items[k], stdv, dtype);
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(items.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("writing " + path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

struct Placed {
  const HfTensorSpec* spec;
  uint64_t begin, end;  // data_offsets
};

struct Shard {
  std::string file;
  std::vector<Placed> tensors;
  uint64_t bytes = 0;
};

std::vector<Shard> plan_shards(const std::vector<HfTensorSpec>& specs, size_t esz, uint64_t max_bytes) {
  std::vector<Shard> shards(1);
  for (const HfTensorSpec& s : specs) {
    const uint64_t nb = static_cast<uint64_t>(s.numel()) * esz;
    if (!shards.back().tensors.empty() && shards.back().bytes + nb > max_bytes) shards.emplace_back();
    Shard& sh = shards.back();
    sh.tensors.push_back({&s, sh.bytes, sh.bytes + nb});
    sh.bytes += nb;
  }
  if (shards.size() == 1) {
    shards[0].file = "model.safetensors";
  } else {
    char buf[64];
    for (size_t i = 0; i < shards.size(); ++i) {
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      shards[i].file = buf;
    }
  }
  return shards;
}

// u64 length + JSON header padded with spaces to a multiple of 8 (formats.md §1.4).
std::string shard_header(const Shard& sh, DType dtype) {
  OrderedJson h;
  h["__metadata__"] = {{"format", "pt"}};
  for (const Placed& p : sh.tensors) {
    h[p.spec->name] = {{"dtype", dtype_safetensors_name(dtype)},
                       {"shape", p.spec->shape},
                       {"data_offsets", {p.begin, p.end}}};
  }
  std::string js = h.dump();
  js.append((8 - js.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = js.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + js;
}

// Streams one shard's data through two buffers: all cores fill one while a writer thread
// writes the other. Not fsync'd: a random checkpoint is cheap to regenerate, and syncing 28 GB
// would dominate the run; the temp-name + rename still keeps a partial file out of sight.
class ShardWriter {
 public:
  ShardWriter(int fd, std::string path, const InitModelOptions& o)
      : fd_(fd), path_(std::move(path)), opts_(o), esz_(dtype_size(o.dtype)) {
    for (auto& b : bufs_) b.reset(new uint8_t[kInitChunkBytes]);
  }

  Status write_tensor(const HfTensorSpec& spec) {
    const uint64_t key = tensor_key(opts_.seed, spec.name);
    const uint64_t numel = static_cast<uint64_t>(spec.numel());
    for (uint64_t off = 0; off < numel;) {
      const uint64_t room = (kInitChunkBytes - used_) / esz_;
      const uint64_t take = std::min({room, numel - off, kFillItemElems});
      items_.push_back({&spec, key, off, take, bufs_[cur_].get() + used_});
      used_ += take * esz_;
      off += take;
      if (kInitChunkBytes - used_ < esz_) RETURN_IF_ERROR(flush());
    }
    return Status::OK();
  }

  Status finish() {
    RETURN_IF_ERROR(flush());
    return join_writer();
  }

  ~ShardWriter() { join_writer().ignore_error(); }

 private:
  Status flush() {
    if (used_ == 0) return Status::OK();
    parallel_fill(items_, static_cast<float>(opts_.std), opts_.dtype, threads());
    RETURN_IF_ERROR(join_writer());
    const uint8_t* data = bufs_[cur_].get();
    const size_t n = used_;
    writer_ = std::thread([this, data, n] { write_status_ = write_all(fd_, data, n, path_); });
    cur_ ^= 1;
    used_ = 0;
    items_.clear();
    return Status::OK();
  }

  Status join_writer() {
    if (writer_.joinable()) writer_.join();
    return write_status_;
  }

  int threads() const {
    if (opts_.threads > 0) return opts_.threads;
    return std::max(1u, std::thread::hardware_concurrency());
  }

  int fd_;
  std::string path_;
  const InitModelOptions& opts_;
  size_t esz_;
  std::unique_ptr<uint8_t[]> bufs_[2];
  int cur_ = 0;
  size_t used_ = 0;
  std::vector<FillItem> items_;
  std::thread writer_;
  Status write_status_;
};

Status write_shard(const std::string& dir, const Shard& sh, const InitModelOptions& opts) {
  const std::string path = path_join(dir, sh.file);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("creating " + tmp);
  Status s = [&]() -> Status {
    const std::string hdr = shard_header(sh, opts.dtype);
    RETURN_IF_ERROR(write_all(fd, reinterpret_cast<const uint8_t*>(hdr.data()), hdr.size(), tmp));
    ShardWriter w(fd, tmp, opts);
    for (const Placed& p : sh.tensors) RETURN_IF_ERROR(w.write_tensor(*p.spec));
    return w.finish();
  }();
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("closing " + tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoError("renaming " + tmp + " to " + path);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

bool is_checkpoint_file(const std::string& name) {
  return name == "config.json" || name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (name.rfind("model-", 0) == 0 && name.size() > 12 &&
          name.compare(name.size() - 12, 12, ".safetensors") == 0);
}

// A temp file of a killed init-model: "<checkpoint file>.tmp.<pid>" (write_shard,
// write_file_atomic) whose process is gone. Removed before writing: a killed 28 GB run would
// otherwise keep its partial shards, unseen, taking the space the new run needs.
bool is_stale_temp(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || !is_checkpoint_file(name.substr(0, at))) return false;
  const std::string digits = name.substr(at + 5);
  long long pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || pid <= 0 ||
      pid > std::numeric_limits<pid_t>::max())
    return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Refuses to mix a new checkpoint with an old one; with `overwrite`, removes the old files.
// Removes the temps of killed runs either way (is_stale_temp), counted in *swept.
Status prepare_dir(const std::string& dir, bool overwrite, int* swept) {
  RETURN_IF_ERROR(make_dirs(dir), "creating output directory " << dir);
  std::error_code ec;
  std::vector<std::filesystem::path> old;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_checkpoint_file(name)) old.push_back(e.path());
    std::error_code rec;
    if (e.is_regular_file(rec) && is_stale_temp(name) && std::filesystem::remove(e.path(), rec)) ++*swept;
  }
  if (ec) return IOError(Str() << "listing " << dir << ": " << ec.message());
  if (old.empty()) return Status::OK();
  if (!overwrite) {
    return InvalidArgument(Str() << dir << " already holds a checkpoint (" << old[0].filename().string()
                                 << "); remove it or pass --force");
  }
  for (const auto& p : old) {
    if (!std::filesystem::remove(p, ec)) return IOError(Str() << "removing " << p.string() << ": " << ec.message());
  }
  return Status::OK();
}

Status check_config(const ModelConfig& c, DType dtype) {
  if (c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0 || c.vocab_size <= 0) {
    return InvalidArgument("model config has a non-positive size");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(Str() << "num_attention_heads " << c.num_heads << " is not a multiple of num_key_value_heads "
                                 << c.num_kv_heads);
  }
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
    return InvalidArgument(Str() << "init-model writes bfloat16, float16 or float32, not " << dtype_name(dtype));
  }
  return Status::OK();
}

Status write_index(const std::string& dir, const std::vector<Shard>& shards, uint64_t total) {
  OrderedJson idx;
  idx["metadata"] = {{"total_size", total}};
  OrderedJson map = OrderedJson::object();
  for (const Shard& sh : shards) {
    for (const Placed& p : sh.tensors) map[p.spec->name] = sh.file;
  }
  idx["weight_map"] = std::move(map);
  return write_file_atomic(path_join(dir, "model.safetensors.index.json"), idx.dump(2) + "\n");
}

}  // namespace

void hf_init_values(const HfTensorSpec& spec, uint64_t seed, double std, uint64_t first, uint64_t n,
                    float* out) {
  gen_values(spec, tensor_key(seed, spec.name), static_cast<float>(std), first, n, out);
}

StatusOr<InitModelResult> init_model(const ModelConfig& config, const std::string& out_dir,
                                     const InitModelOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(check_config(config, opts.dtype));
  InitModelResult r;
  RETURN_IF_ERROR(prepare_dir(out_dir, opts.overwrite, &r.stale_temps_removed));
  const std::vector<HfTensorSpec> specs = hf_tensor_list(config);
  const std::vector<Shard> shards = plan_shards(specs, dtype_size(opts.dtype), opts.max_shard_bytes);
  // A config of a terabyte model would write until the disk is full (session 23 audit): the
  // checkpoint must fit the free space first.
  uint64_t total = 0;
  for (const Shard& sh : shards) total += sh.bytes;
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(out_dir, ec);
  if (!ec && total > space.available)
    return InvalidArgument(Str() << "init-model: the checkpoint needs " << total / 1e9 << " GB, " << out_dir << " has "
                                 << space.available / 1e9 << " GB free");
  for (const Shard& sh : shards) {
    RETURN_IF_ERROR(write_shard(out_dir, sh, opts), "writing " << path_join(out_dir, sh.file));
    r.bytes += sh.bytes;
    r.files.push_back(sh.file);
  }
  for (const HfTensorSpec& s : specs) r.params += s.numel();
  if (shards.size() > 1) RETURN_IF_ERROR(write_index(out_dir, shards, r.bytes));
  ModelConfig c = config;
  c.torch_dtype = dtype_name(opts.dtype);
  const std::string cfg_path = path_join(out_dir, "config.json");
  RETURN_IF_ERROR(write_file_atomic(cfg_path, hf_config_to_json(c).dump(2) + "\n"), "writing " << cfg_path);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace st
