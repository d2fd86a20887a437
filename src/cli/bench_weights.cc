#include "cli/bench_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "core/code12.h"
#include "model/presets.h"
#include "model/weights.h"
#include "store/disk_store.h"
#include "store/host_memory.h"
#include "store/ram_store.h"
#include "store/sharder.h"

namespace st {

namespace {

constexpr size_t kIoAlign = 4096;
constexpr size_t kFillChunkElems = size_t{1} << 22;  // unit of work and of seeding

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 16 random bits -> a bf16 of magnitude in [2^-13, 2^-5) with a random sign.
uint16_t bf16_from_bits(uint64_t r) {
  const uint16_t sign = static_cast<uint16_t>((r >> 15) & 1u) << 15;
  const uint16_t exp = static_cast<uint16_t>(127 - 13 + ((r >> 7) & 7u));
  return static_cast<uint16_t>(sign | (exp << 7) | (r & 0x7Fu));
}

void fill_ones(void* dst, DType dtype, size_t n) {
  if (dtype == DType::kBF16) {
    std::fill_n(static_cast<uint16_t*>(dst), n, f32_to_bf16(1.0f));
  } else {
    std::fill_n(static_cast<float*>(dst), n, 1.0f);
  }
}

bool is_norm(LayerTensor t) {
  return t == LayerTensor::kInputNorm || t == LayerTensor::kPostNorm || t == LayerTensor::kQNorm ||
         t == LayerTensor::kKNorm;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void fill_random_weights(void* dst, DType dtype, size_t n, uint64_t seed, uint64_t first) {
  CHECK(dtype == DType::kBF16 || dtype == DType::kF32, "synthetic weights are bf16 or f32");
  uint64_t s = seed * 0xD1B54A32D192ED03ull + first;
  uint64_t r = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 == 0) r = splitmix64(s);
    const uint16_t b = bf16_from_bits(r >> (16 * (i % 4)));
    if (dtype == DType::kBF16) {
      static_cast<uint16_t*>(dst)[i] = b;
    } else {
      static_cast<float*>(dst)[i] = bf16_to_f32(b);
    }
  }
}

StatusOr<std::unique_ptr<SyntheticStore>> SyntheticStore::create(Backend* be, const ModelConfig& c, DType dtype,
                                                                 const std::string& source, bool pin,
                                                                 uint64_t seed, int threads, BaseQuant quant) {
  if (dtype != DType::kBF16 && dtype != DType::kF32)
    return InvalidArgument(Str() << "bench weights must be bfloat16 or float32, not " << dtype_name(dtype));
  if (const std::string why = base_layout_error(c, dtype, quant); !why.empty())
    return InvalidArgument(Str() << source << ": " << why);
  StoreManifest m;
  m.config = c;
  m.dtype = dtype;
  m.quant = quant;
  m.num_layers = static_cast<int>(c.num_layers);
  m.layer_bytes = make_layer_layout(c, dtype, quant).bytes;
  m.extras_bytes = make_extras_layout(c, dtype).bytes;
  m.source = source;
  m.fingerprint = "synthetic";
  std::unique_ptr<SyntheticStore> st(new SyntheticStore(be, std::move(m)));
  st->stride_ = round_up(st->m_.layer_bytes, kIoAlign);
  st->extras_offset_ = st->stride_ * static_cast<size_t>(st->m_.num_layers);
  st->arena_bytes_ = st->extras_offset_ + round_up(st->m_.extras_bytes, kIoAlign);
  void* p = mmap(nullptr, st->arena_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return ResourceExhausted(Str() << "bench: cannot allocate " << st->arena_bytes_ << " bytes of host memory for "
                                   << source);
  st->arena_ = static_cast<char*>(p);
  auto t0 = std::chrono::steady_clock::now();
  st->fill(seed, threads);
  if (pin) {
    Status s = be->register_host(st->arena_, st->arena_bytes_);
    if (s.ok()) {
      st->pinned_ = true;
    } else {
      std::fprintf(stderr, "streamtune: warning: could not pin the %zu-byte bench store (%s); copies will be slow\n",
                   st->arena_bytes_, s.message().c_str());
    }
  }
  st->fill_seconds_ = seconds_since(t0);
  return st;
}

// Fills the arena chunk by chunk on all threads (first touch included), then sets norms to 1.
void SyntheticStore::fill(uint64_t seed, int threads) {
  const DType dt = m_.dtype;
  const size_t esz = dtype_size(dt);
  const size_t total_elems = arena_bytes_ / esz;
  const size_t chunks = (total_elems + kFillChunkElems - 1) / kFillChunkElems;
  int nt = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < chunks;) {
      const size_t first = k * kFillChunkElems;
      const size_t n = std::min(kFillChunkElems, total_elems - first);
      fill_random_weights(arena_ + first * esz, dt, n, seed, first);
    }
  };
  if (m_.quant == BaseQuant::kCode12) {
    fill_code12_twin(seed, nt);
  } else {
    std::vector<std::thread> pool;
    for (int i = 1; i < nt; ++i) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }

  // NF4 codes keep their random bytes (every byte is two valid codes); the block scales get 2^-5,
  // the largest magnitude of the random bf16 weights.
  const LayerLayout ll = make_layer_layout(m_.config, dt, m_.quant);
  for (int l = 0; l < m_.num_layers; ++l) {
    char* blob = arena_ + static_cast<size_t>(l) * stride_;
    for (const LayerTensorSpec& t : ll.tensors) {
      if (is_norm(t.id)) fill_ones(blob + t.offset, dt, t.nbytes / esz);
      if (t.dtype == DType::kF32 && m_.quant == BaseQuant::kNF4 && t.hf_suffix.ends_with(".absmax"))
        std::fill_n(reinterpret_cast<float*>(blob + t.offset), t.nbytes / 4, 0.03125f);
    }
  }
  const ExtrasLayout el = make_extras_layout(m_.config, dt);
  for (const LayerTensorSpec& t : el.tensors) {
    if (t.hf_suffix.find("norm") != std::string::npos) fill_ones(arena_ + extras_offset_ + t.offset, dt, t.nbytes / esz);
  }
}

namespace {

// Elements [first, first + n) of what the dense fill writes at those element offsets of its arena
// (its chunks seed by their first element).
void dense_fill_values(uint16_t* out, size_t first, size_t n, uint64_t seed) {
  std::vector<uint16_t> chunk(kFillChunkElems);
  for (size_t e = first; e < first + n;) {
    const size_t k0 = e / kFillChunkElems * kFillChunkElems;
    const size_t take = std::min(k0 + kFillChunkElems, first + n) - e;
    fill_random_weights(chunk.data(), DType::kBF16, e - k0 + take, seed, k0);
    std::memcpy(out + (e - first), chunk.data() + (e - k0), take * 2);
    e += take;
  }
}

}  // namespace

// code12: the weights of the dense bf16 store of the same (preset, seed) -- each tensor takes the
// values the dense fill gives its place in the dense arena -- with the linears coded (their 8
// exponents never escape). So `bench --quant code12` trains on the very weights of `--quant none`
// and must log the same losses. Layers in parallel.
void SyntheticStore::fill_code12_twin(uint64_t seed, int threads) {
  const LayerLayout dense = make_layer_layout(m_.config, DType::kBF16);
  const LayerLayout coded = make_layer_layout(m_.config, DType::kBF16, BaseQuant::kCode12);
  const size_t dense_stride = round_up(dense.bytes, kIoAlign);
  std::atomic<int> next{0};
  auto work = [&] {
    std::vector<uint16_t> w;
    for (int l; (l = next.fetch_add(1)) < m_.num_layers;) {
      char* blob = arena_ + static_cast<size_t>(l) * stride_;
      for (size_t i = 0; i < coded.tensors.size(); ++i) {
        const LayerTensorSpec& t = coded.tensors[i];
        const LayerTensorSpec* d = dense.find(t.id);
        CHECK(d != nullptr);
        const size_t n = d->nbytes / 2;
        w.resize(n);
        dense_fill_values(w.data(), (static_cast<size_t>(l) * dense_stride + d->offset) / 2, n, seed);
        if (!t.quantized()) {
          std::memcpy(blob + t.offset, w.data(), t.nbytes);
          continue;
        }
        const LayerTensorSpec& aux = coded.tensors[++i];
        CHECK_OK(code12_encode(w.data(), static_cast<int64_t>(n), reinterpret_cast<uint8_t*>(blob + t.offset),
                               reinterpret_cast<uint8_t*>(blob + aux.offset), t.hf_suffix));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  dense_fill_values(reinterpret_cast<uint16_t*>(arena_ + extras_offset_), dense_stride * m_.num_layers / 2,
                    m_.extras_bytes / 2, seed);
}

SyntheticStore::~SyntheticStore() {
  if (!arena_) return;
  be_->sync_all();
  if (pinned_) be_->unregister_host(arena_);
  munmap(arena_, arena_bytes_);
}

Status SyntheticStore::load_layer(int layer, void* dst) {
  CHECK(layer >= 0 && layer < m_.num_layers, "layer " << layer);
  be_->copy_h2d(dst, layer_host(layer), m_.layer_bytes, StreamId::kH2D);
  return Status::OK();
}

Status SyntheticStore::load_extras(void* dst) {
  be_->copy_h2d(dst, arena_ + extras_offset_, m_.extras_bytes, StreamId::kH2D);
  be_->sync_stream(StreamId::kH2D);
  return Status::OK();
}

StatusOr<BenchWeights> synthetic_weights(Backend* be, const std::string& preset, DType dtype, BaseQuant quant,
                                         bool pin, uint64_t seed) {
  BenchWeights w;
  ASSIGN_OR_RETURN(w.config, model_preset(preset));
  w.source = "preset:" + preset;
  ASSIGN_OR_RETURN(std::unique_ptr<SyntheticStore> s,
                   SyntheticStore::create(be, w.config, dtype, w.source, pin, seed, 0, quant));
  w.setup_seconds = s->fill_seconds();
  w.store = std::move(s);
  return w;
}

StatusOr<BenchWeights> checkpoint_weights(Backend* be, const std::string& path, DType dtype, BaseQuant quant,
                                          const std::string& tier) {
  auto t0 = std::chrono::steady_clock::now();
  ShardOptions so;
  so.dtype = dtype;
  so.quant = quant;
  ASSIGN_OR_RETURN(ShardResult sr, shard_model_path(path, so), "sharding " << path);
  BenchWeights w;
  w.config = sr.manifest.config;
  w.source = sr.manifest.source;
  w.store_dir = sr.dir;
  if (tier == "disk") {
    ASSIGN_OR_RETURN(w.store, DiskStore::open(sr.dir, be), "opening the disk store " << sr.dir);
  } else {
    RamStoreOptions ro;
    ro.pin = tier != "off";
    // store/host_memory.h Note [partial RAM store]: what the free RAM cannot hold is read from disk
    // (said on stderr: such a bench times the disk too).
    const uint64_t budget = default_ram_budget(host_memory());
    ro.in_ram = choose_ram_layers(sr.manifest, budget, {});
    if (!ro.in_ram.empty())
      std::fprintf(stderr, "%s\n", describe_ram_layers(sr.manifest, sr.dir, ro.in_ram, {}, budget, "MemAvailable less a margin").c_str());
    ASSIGN_OR_RETURN(w.store, RamStore::open(sr.dir, be, ro), "opening the RAM store " << sr.dir);
  }
  w.setup_seconds = seconds_since(t0);
  return w;
}


}  // namespace st
