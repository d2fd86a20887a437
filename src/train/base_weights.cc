#include "train/base_weights.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/code12.h"
#include "model/load.h"
#include "store/disk_store.h"
#include "store/host_memory.h"
#include "store/ram_store.h"
#include "store/sharder.h"
#include "stream/streamed_layer_source.h"
#include "train/train_data.h"

namespace st {
namespace {

// Progress redraws in place (\r) only on a terminal; a log gets about ten plain lines.
bool stderr_is_tty() { return isatty(fileno(stderr)) != 0; }
bool progress_line_due(int done, int total) { return done == total || done % std::max(1, total / 10) == 0; }

StatusOr<std::unique_ptr<LayerStore>> open_tier(const std::string& tier, const std::string& dir, Backend* be,
                                                std::vector<bool> in_ram = {}) {
  if (tier == "disk") {
    ASSIGN_OR_RETURN(std::unique_ptr<DiskStore> d, DiskStore::open(dir, be), "opening the disk store " << dir);
    return std::unique_ptr<LayerStore>(std::move(d));
  }
  RamStoreOptions ro;
  ro.in_ram = std::move(in_ram);
  ro.progress = [tty = stderr_is_tty()](int done, int total) {
    if (tty) {
      std::fprintf(stderr, "\rloading the layer store into RAM: %d/%d files", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    } else if (progress_line_due(done, total)) {
      std::fprintf(stderr, "loading the layer store into RAM: %d/%d files\n", done, total);
    }
  };
  ASSIGN_OR_RETURN(std::unique_ptr<RamStore> r, RamStore::open(dir, be, ro), "opening the RAM store " << dir);
  return std::unique_ptr<LayerStore>(std::move(r));
}

Status load_extras_via(Backend* be, LayerStore* store, Model& m) {
  ASSIGN_OR_RETURN(std::vector<char> host, extras_to_host(be, *store));
  m.load_extras_from_host(host.data());
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<bool>> ram_layers_for(const TrainConfig& cfg, const ShardResult& store, const Plan& plan) {
  uint64_t budget = 0;
  const HostMemory hm = host_memory();
  if (!cfg.ram_budget.empty()) {
    ASSIGN_OR_RETURN(budget, parse_byte_size(cfg.ram_budget), "ram_budget");
  } else {
    budget = default_ram_budget(hm);
  }
  const StoreManifest& m = store.manifest;  // validated by the sharder: not read again here
  std::vector<bool> in_ram = choose_ram_layers(m, budget, plan.resident_layers);
  if (in_ram.empty()) return in_ram;
  std::vector<bool> resident(static_cast<size_t>(m.num_layers), cfg.stream == "off");
  for (int l : plan.resident_layers) resident[static_cast<size_t>(l)] = true;
  const std::string why = cfg.ram_budget.empty() ? Str() << "MemAvailable " << format_bytes(hm.available)
                                                        << " less a margin; set ram_budget to change it"
                                                 : Str() << "ram_budget";
  std::fprintf(stderr, "%s\n", describe_ram_layers(m, store.dir, in_ram, resident, budget, why).c_str());
  return in_ram;
}

StatusOr<DeviceKind> device_kind_for(const std::string& device) {
  if (device == "cpu") return DeviceKind::kCpu;
  if (device == "cuda") return DeviceKind::kCuda;
  if (device != "auto") return InvalidArgument("device: '" + device + "' (expected auto, cpu or cuda)");
  return cuda_available() ? DeviceKind::kCuda : DeviceKind::kCpu;
}

Status check_stream_tier(const std::string& stream) {
  if (stream != "off" && stream != "ram" && stream != "disk")
    return InvalidArgument(Str() << "stream: '" << stream << "' (expected off, ram or disk)");
  return Status::OK();
}

DeviceSpeed planning_speed(const TrainConfig& cfg, Backend* be) {
  if (be->kind() != DeviceKind::kCuda || cfg.stream == "off") return DeviceSpeed{};
  return probe_device_speed(be);
}

StatusOr<Plan> plan_for(const TrainConfig& cfg, Backend* be, const ModelConfig& mc, DType act, const DeviceSpeed& speed) {
  PlanInput in;
  in.model = mc;
  in.dtype = act;
  ASSIGN_OR_RETURN(in.quant, base_quant_from(cfg));
  in.micro_batch_size = micro_batch_rows(cfg);
  in.sequence_len = cfg.sequence_len;
  ASSIGN_OR_RETURN(in.lora, lora_config_from(cfg));
  in.num_slots = static_cast<int>(cfg.stream_buffers);
  in.tier = cfg.stream;
  in.device = be->kind();
  in.offload_embeddings = cfg.offload_embeddings;
  in.vocab_chunk = cfg.vocab_chunk;
  in.recompute = cfg.recompute;
  in.gradient_accumulation_steps = cfg.gradient_accumulation_steps;
  in.layer_major = cfg.layer_major;
  const bool packed = cfg.sample_packing || padding_free_on(cfg);
  if (act == DType::kBF16 && cfg.attention != "own")  // bf16-only; preparing builds its graphs now
    in.fused_attention_workspace = fused_attention_workspace(be, micro_batch_rows(cfg), cfg.sequence_len, mc, packed);
  if (!cfg.vram_budget.empty()) {
    ASSIGN_OR_RETURN(in.vram_budget, parse_byte_size(cfg.vram_budget), "vram_budget");
  }
  in.link_gbps = speed.link_gbps;  // Note [host extras plan]
  in.gemm_tflops = speed.gemm_tflops;
  uint64_t free_b = 0, total_b = 0;
  if (be->memory_info(&free_b, &total_b)) in.device_free_bytes = free_b;
  return make_plan_fused_fallback(
      in, [&] { return fused_attention_min_workspace(be, micro_batch_rows(cfg), cfg.sequence_len, mc, packed); });
}

StreamedSourceOptions streamed_options(const TrainConfig& cfg, const Plan& plan, const ModelConfig& mc) {
  StreamedSourceOptions opts;
  opts.resident_layers = plan.resident_layers;
  if (cfg.stream == "off") {
    opts.resident_layers.clear();
    for (int l = 0; l < static_cast<int>(mc.num_layers); ++l) opts.resident_layers.push_back(l);
  }
  opts.num_slots = std::max(1, plan.num_slots);
  return opts;
}

TrainerParts streamed_parts(LayerStore* store, Backend* be, StreamedSourceOptions opts, const ModelConfig& mc,
                            const std::string& base_model_name) {
  TrainerParts p;
  p.model = mc;
  p.base_model_name = base_model_name;
  p.make_layers = [store, opts](Backend* b, const LayerLayout& layout) -> StatusOr<std::unique_ptr<LayerSource>> {
    if (layout.bytes != store->manifest().layer_bytes)
      return Internal(Str() << "layer layout (" << layout.bytes << " bytes) does not match the store ("
                            << store->manifest().layer_bytes << " bytes)");
    ASSIGN_OR_RETURN(std::unique_ptr<StreamedLayerSource> s, StreamedLayerSource::create(b, store, opts));
    return std::unique_ptr<LayerSource>(std::move(s));
  };
  p.load_extras = [be, store](Model& m) { return load_extras_via(be, store, m); };
  return p;
}

StatusOr<ModelConfig> base_model_config(const std::string& path) {
  if (StatusOr<StoreManifest> m = open_store_manifest(path); m.ok()) return m->config;  // a layer store
  ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, open_model_source(path), "base_model");
  return src->config();
}

StatusOr<std::string> resolve_stream_compress(const TrainConfig& cfg, Backend* be, DType act, const DeviceSpeed& speed,
                                              std::string* why) {
  if (cfg.stream_compress != "auto") return cfg.stream_compress;
  if (act != DType::kBF16 || cfg.adapter != "lora" || cfg.stream == "off") return std::string("false");
  ASSIGN_OR_RETURN(ModelConfig mc, base_model_config(cfg.base_model));
  TrainConfig dense = cfg;
  dense.stream_compress = "false";
  StatusOr<Plan> planned = plan_for(dense, be, mc, act, speed);
  if (!planned.ok()) {  // the dense base does not fit: the smaller code12 slots may (else its plan says why)
    if (why) *why = "stream_compress: auto -> true: the dense base does not fit the device memory; the code12 base's layers are ~24% smaller";
    return std::string("true");
  }
  const Plan& p = *planned;
  if (p.streamed_layers() == 0) return std::string("false");
  if (why)
    *why = Str() << "stream_compress: auto -> true: the plan streams " << p.streamed_layers() << " of " << p.num_layers
                 << " layers, which move ~24% fewer bytes from a code12 base (lossless; stream_compress: false "
                    "keeps the dense store)";
  return std::string("true");
}

StatusOr<ShardResult> shard_base_model(const TrainConfig& given, Backend* be, DType act, const DeviceSpeed& speed,
                                       std::string* stream_compress) {
  std::string why;
  ASSIGN_OR_RETURN(*stream_compress, resolve_stream_compress(given, be, act, speed, &why));
  if (!why.empty()) std::fprintf(stderr, "%s\n", why.c_str());
  TrainConfig cfg = given;
  cfg.stream_compress = *stream_compress;
  ShardOptions so;
  so.dtype = act;
  ASSIGN_OR_RETURN(so.quant, base_quant_from(cfg));
  so.cache_dir = cfg.cache_dir;
  so.progress = [tty = stderr_is_tty()](int done, int total, const std::string& what) {
    if (tty) {
      std::fprintf(stderr, "\rsharding: %d/%d %s        ", done, total, what.c_str());
      if (done == total) std::fprintf(stderr, "\n");
    } else if (progress_line_due(done, total)) {
      std::fprintf(stderr, "sharding: %d/%d %s\n", done, total, what.c_str());
    }
  };
  StatusOr<ShardResult> sr = shard_model_path(cfg.base_model, so);
  if (!sr.ok() && so.quant == BaseQuant::kCode12 && given.stream_compress == "auto" &&
      sr.status().message().find(kCode12Refusal) != std::string::npos) {
    std::fprintf(stderr, "stream_compress: auto -> false: %s\n", sr.status().message().c_str());
    *stream_compress = "false";
    so.quant = BaseQuant::kNone;
    sr = shard_model_path(cfg.base_model, so);
  }
  RETURN_IF_ERROR(sr.status(), "preparing the layer store for " << cfg.base_model);
  return sr;
}

StatusOr<BaseWeights> open_base_weights(const TrainConfig& given, Backend* be, DType act) {
  RETURN_IF_ERROR(check_stream_tier(given.stream));
  BaseWeights bw;
  const DeviceSpeed speed = planning_speed(given, be);  // one probe for both plans below
  ASSIGN_OR_RETURN(ShardResult sr, shard_base_model(given, be, act, speed, &bw.stream_compress));
  TrainConfig cfg = given;
  cfg.stream_compress = bw.stream_compress;
  bw.store_dir = sr.dir;
  bw.store_reused = sr.reused;
  bw.store_reason = sr.reason;
  const ModelConfig& mc = sr.manifest.config;
  ASSIGN_OR_RETURN(bw.plan, plan_for(cfg, be, mc, act, speed));
  std::vector<bool> in_ram;
  if (cfg.stream != "disk") {
    ASSIGN_OR_RETURN(in_ram, ram_layers_for(cfg, sr, bw.plan));
  }
  if (!in_ram.empty()) {  // the banner's host memory: the arena as opened, not every layer
    bw.plan.ram_layers = static_cast<int>(std::count(in_ram.begin(), in_ram.end(), true));
  }
  ASSIGN_OR_RETURN(bw.store, open_tier(cfg.stream, sr.dir, be, std::move(in_ram)));
  if (bw.plan.ram_layers >= 0) {
    const StoreManifest& m = bw.store->manifest();
    const uint64_t planned = ram_layer_stride(m) * static_cast<uint64_t>(m.num_layers) + ram_extras_bytes(m);
    bw.plan.host_bytes = bw.plan.host_bytes - std::min(bw.plan.host_bytes, planned) + bw.store->host_bytes();
  }

  bw.parts = streamed_parts(bw.store.get(), be, streamed_options(cfg, bw.plan, mc), mc, cfg.base_model);
  bw.parts.host_extras = bw.plan.host_extras;
  bw.parts.recompute = bw.plan.recompute;
  bw.parts.micro_batch_slots = bw.plan.micro_batch_slots;
  bw.parts.fused_attention_allowance = bw.plan.fused_attention_allowance;
  bw.parts.launch_plan_bytes = bw.plan.launch_plan_bytes;
  return bw;
}

}  // namespace st
