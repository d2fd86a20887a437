// PEFT adapter files (formats.md §3): adapter_config.json + adapter_model.safetensors.
#include <algorithm>
#include <cmath>

#include "core/file.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "model/lora.h"

namespace st {
namespace {

// init_lora_weights values that change the base weights or need data we do not have.
constexpr const char* kRefusedInits[] = {"pissa", "olora", "loftq", "eva", "corda", "orthogonal", "mica"};

Status check_flag_false(const Json& j, const char* key, const std::string& what) {
  if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>())
    return Unimplemented(Str() << what << ": " << key << "=true is not supported");
  return Status::OK();
}

Status check_null_or_empty(const Json& j, const char* key, const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return Status::OK();
  if ((j[key].is_object() || j[key].is_array()) && j[key].empty()) return Status::OK();
  return Unimplemented(Str() << what << ": " << key << " is not supported (got " << j[key].dump() << ")");
}

Status check_init(const Json& j, const std::string& what) {
  if (!j.contains("init_lora_weights")) return Status::OK();
  const Json& v = j["init_lora_weights"];
  if (v.is_boolean() || v.is_null()) return Status::OK();
  if (!v.is_string()) return InvalidArgument(Str() << what << ": init_lora_weights has type " << v.type_name());
  std::string s = v.get<std::string>();
  if (s == "gaussian") return Status::OK();
  for (const char* r : kRefusedInits)
    if (s.rfind(r, 0) == 0)
      return Unimplemented(Str() << what << ": init_lora_weights=\"" << s
                                 << "\" is not supported (it changes the base weights)");
  return Unimplemented(Str() << what << ": unknown init_lora_weights \"" << s << "\"");
}

StatusOr<std::vector<std::string>> target_list(const Json& j, const std::string& what) {
  if (!j.contains("target_modules") || j["target_modules"].is_null())
    return InvalidArgument(Str() << what << ": target_modules is missing");
  const Json& t = j["target_modules"];
  if (t.is_string()) {
    if (t.get<std::string>() == "all-linear") return std::vector<std::string>{"all-linear"};
    return Unimplemented(Str() << what << ": regex target_modules \"" << t.get<std::string>()
                               << "\" is not supported (use a list)");
  }
  if (!t.is_array()) return InvalidArgument(Str() << what << ": target_modules must be a list");
  std::vector<std::string> out;
  for (const Json& e : t) {
    if (!e.is_string()) return InvalidArgument(Str() << what << ": target_modules entries must be strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// layers_to_transform (PEFT: an int or a list of layer indices; null = every layer), found in the
// module names by layers_pattern -- null (PEFT's default: the number after the module list's name)
// or "layers" / ["layers"], which is what the HF causal-LM layouts call it. Sorted, distinct.
StatusOr<std::vector<int64_t>> layers_to_transform(const Json& j, const std::string& what) {
  std::vector<int64_t> out;
  if (!j.contains("layers_to_transform") || j["layers_to_transform"].is_null()) return out;
  const Json& v = j["layers_to_transform"];
  auto take = [&](const Json& e) -> Status {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      return InvalidArgument(Str() << what << ": layers_to_transform must hold layer indices >= 0, got " << e.dump());
    out.push_back(e.get<int64_t>());
    return Status::OK();
  };
  if (v.is_array()) {
    if (v.empty())  // PEFT: an adapter on no layer at all
      return InvalidArgument(Str() << what << ": layers_to_transform is an empty list (the adapter on no layer)");
    for (const Json& e : v) RETURN_IF_ERROR(take(e));
  } else {
    RETURN_IF_ERROR(take(v));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (j.contains("layers_pattern") && !j["layers_pattern"].is_null()) {
    const Json& p = j["layers_pattern"];
    const bool ok = (p.is_string() && p.get<std::string>() == "layers") ||
                    (p.is_array() && p.size() == 1 && p[0].is_string() && p[0].get<std::string>() == "layers");
    if (!ok)
      return Unimplemented(Str() << what << ": layers_pattern " << p.dump()
                                 << " is not supported (null or \"layers\": the decoder layers of model.layers.N)");
  }
  return out;
}

Status validate_variant(const Json& j, const std::string& what) {
  if (!j.contains("peft_type") || !j["peft_type"].is_string())
    return InvalidArgument(Str() << what << ": peft_type is missing");
  const std::string pt = j["peft_type"].get<std::string>();
  if (pt != "LORA") return Unimplemented(Str() << what << ": peft_type \"" << pt << "\" is not supported (only LORA)");
  RETURN_IF_ERROR(check_flag_false(j, "fan_in_fan_out", what));
  RETURN_IF_ERROR(check_flag_false(j, "lora_bias", what));
  RETURN_IF_ERROR(check_init(j, what));
  if (j.contains("bias") && j["bias"].is_string() && j["bias"].get<std::string>() != "none")
    return Unimplemented(Str() << what << ": bias=\"" << j["bias"].get<std::string>() << "\" is not supported");
  for (const char* k : {"modules_to_save", "rank_pattern", "alpha_pattern", "layer_replication",
                        "trainable_token_indices", "target_parameters"})
    RETURN_IF_ERROR(check_null_or_empty(j, k, what));
  if (j.contains("task_type") && j["task_type"].is_string() && j["task_type"].get<std::string>() != "CAUSAL_LM")
    return Unimplemented(Str() << what << ": task_type \"" << j["task_type"].get<std::string>()
                               << "\" is not supported (CAUSAL_LM)");
  return Status::OK();
}

}  // namespace

StatusOr<LoraConfig> read_peft_config(const std::string& dir) {
  const std::string path = path_join(dir, "adapter_config.json");
  ASSIGN_OR_RETURN(Json j, read_json_file(path));
  RETURN_IF_ERROR(validate_variant(j, path));
  LoraConfig lc;
  ASSIGN_OR_RETURN(lc.r, json_int(j, "r", path));
  if (lc.r <= 0) return InvalidArgument(Str() << path << ": r must be > 0");
  if (lc.r > kMaxLoraRank)
    return InvalidArgument(Str() << path << ": r = " << lc.r << " is beyond any adapter (at most " << kMaxLoraRank
                                 << "): a damaged adapter_config.json?");
  ASSIGN_OR_RETURN(lc.alpha, json_number(j, "lora_alpha", path));
  if (j.contains("lora_dropout") && j["lora_dropout"].is_number()) lc.dropout = j["lora_dropout"].get<double>();
  if (j.contains("use_rslora") && !j["use_rslora"].is_null()) {
    if (!j["use_rslora"].is_boolean())
      return InvalidArgument(Str() << path << ": use_rslora must be true or false, got " << j["use_rslora"].dump());
    lc.rslora = j["use_rslora"].get<bool>();
  }
  if (j.contains("use_dora") && !j["use_dora"].is_null()) {
    if (!j["use_dora"].is_boolean())
      return InvalidArgument(Str() << path << ": use_dora must be true or false, got " << j["use_dora"].dump());
    lc.dora = j["use_dora"].get<bool>();
  }
  ASSIGN_OR_RETURN(auto names, target_list(j, path));
  ASSIGN_OR_RETURN(auto targets, parse_lora_targets(names), path);
  for (LoraTarget t : targets) lc.targets[static_cast<int>(t)] = true;
  ASSIGN_OR_RETURN(lc.layers, layers_to_transform(j, path));
  return lc;
}

Status Lora::save_peft(const std::string& dir, const std::string& base_model_name) const {
  RETURN_IF_ERROR(make_dirs(dir));
  std::vector<float> host = params_to_host();
  std::vector<TensorToWrite> tensors;
  OrderedJson targets = OrderedJson::array();
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (lc_.targets[t]) targets.push_back(lora_target_name(static_cast<LoraTarget>(t)));
  for (int l = 0; l < static_cast<int>(mc_.num_layers); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto o = off_[idx(l, static_cast<LoraTarget>(t))];
      if (o.first < 0) continue;
      auto [in, out] = lora_target_dims(mc_, static_cast<LoraTarget>(t));
      tensors.push_back({peft_tensor_name(l, static_cast<LoraTarget>(t), false), DType::kF32, {lc_.r, in},
                         host.data() + o.first});
      tensors.push_back({peft_tensor_name(l, static_cast<LoraTarget>(t), true), DType::kF32, {out, lc_.r},
                         host.data() + o.second});
      if (lc_.dora)
        tensors.push_back({peft_magnitude_name(l, static_cast<LoraTarget>(t)), DType::kF32, {out},
                           host.data() + offset_mag(l, static_cast<LoraTarget>(t))});
    }
  }
  RETURN_IF_ERROR(write_safetensors(path_join(dir, "adapter_model.safetensors"), tensors, {{"format", "pt"}}));

  // Sorted keys, as PEFT's save_pretrained writes them; only the classic LoRA keys.
  OrderedJson c;
  c["alpha_pattern"] = OrderedJson::object();
  c["base_model_name_or_path"] = base_model_name;
  c["bias"] = "none";
  c["fan_in_fan_out"] = false;
  c["inference_mode"] = true;
  c["init_lora_weights"] = true;
  c["layers_pattern"] = nullptr;
  if (lc_.layers.empty()) {
    c["layers_to_transform"] = nullptr;
  } else {
    c["layers_to_transform"] = OrderedJson::array();
    for (int64_t l : lc_.layers) c["layers_to_transform"].push_back(l);
  }
  if (lc_.alpha == std::floor(lc_.alpha) && std::fabs(lc_.alpha) < 1e15)
    c["lora_alpha"] = static_cast<int64_t>(lc_.alpha);
  else
    c["lora_alpha"] = lc_.alpha;
  c["lora_bias"] = false;
  c["lora_dropout"] = lc_.dropout;
  c["modules_to_save"] = nullptr;
  c["peft_type"] = "LORA";
  c["r"] = lc_.r;
  c["rank_pattern"] = OrderedJson::object();
  c["revision"] = nullptr;
  c["target_modules"] = targets;
  c["task_type"] = "CAUSAL_LM";
  c["use_dora"] = lc_.dora;
  c["use_rslora"] = lc_.rslora;
  return write_file_atomic(path_join(dir, "adapter_config.json"), c.dump(2) + "\n");
}

Status Lora::load_peft(const std::string& dir) {
  ASSIGN_OR_RETURN(LoraConfig got, read_peft_config(dir));
  const std::string what = path_join(dir, "adapter_config.json");
  if (got.r != lc_.r)
    return InvalidArgument(Str() << what << ": adapter rank r=" << got.r << " but the run uses lora_r=" << lc_.r);
  if (got.dora != lc_.dora)
    return InvalidArgument(Str() << what << ": adapter use_dora=" << (got.dora ? "true" : "false")
                                 << " but the run uses use_dora=" << (lc_.dora ? "true" : "false"));
  if (got.rslora != lc_.rslora)
    return InvalidArgument(Str() << what << ": adapter use_rslora=" << (got.rslora ? "true" : "false")
                                 << " but the run uses use_rslora=" << (lc_.rslora ? "true" : "false"));
  if (std::fabs(got.scaling() - lc_.scaling()) > 1e-6f * std::fabs(lc_.scaling()))
    return InvalidArgument(Str() << what << ": adapter lora_alpha=" << got.alpha << " but the run uses lora_alpha="
                                 << lc_.alpha);
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (got.targets[t] != lc_.targets[t])
      return InvalidArgument(Str() << what << ": adapter targets differ from lora_target_modules at "
                                   << lora_target_name(static_cast<LoraTarget>(t)));
  if (got.layers != lc_.layers) {
    auto list = [](const std::vector<int64_t>& v) {
      if (v.empty()) return std::string("every layer");
      Str s;
      for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
      return s.str();
    };
    return InvalidArgument(Str() << what << ": adapter layers_to_transform (" << list(got.layers)
                                 << ") differs from the run's (" << list(lc_.layers) << ")");
  }

  // adapter_model.bin: PEFT's file before safetensors (a torch.save archive, io/torch_zip.h).
  std::string st_path = path_join(dir, "adapter_model.safetensors");
  const bool torch_bin = !file_exists(st_path) && file_exists(path_join(dir, "adapter_model.bin"));
  if (torch_bin) st_path = path_join(dir, "adapter_model.bin");
  ASSIGN_OR_RETURN(SafetensorsFile f, torch_bin ? SafetensorsFile::open_torch(st_path) : SafetensorsFile::open(st_path));
  std::vector<float> host(static_cast<size_t>(section_), 0.0f);
  size_t expected = 0;
  // Reads tensor `name` (or `alt`) of `shape` (any float dtype) into host[off...] as f32.
  auto read_tensor = [&](const std::string& name, const std::string& alt, const std::vector<int64_t>& shape,
                         int64_t off) -> Status {
    const TensorInfo* ti = f.find(name);
    if (!ti && !alt.empty()) ti = f.find(alt);
    if (!ti) return NotFound(Str() << st_path << ": tensor '" << name << "' is missing");
    if (ti->shape != shape)
      return InvalidArgument(Str() << st_path << ": tensor '" << ti->name << "' has the wrong shape for r=" << lc_.r
                                   << " and this model");
    if (ti->dtype != DType::kF32 && ti->dtype != DType::kBF16 && ti->dtype != DType::kF16)
      return Unimplemented(Str() << st_path << ": tensor '" << ti->name << "' has dtype " << dtype_name(ti->dtype));
    convert_elements(host.data() + off, DType::kF32, f.data(*ti), ti->dtype, static_cast<size_t>(ti->numel()));
    // A NaN or Inf in an adapter is damage: merged, it made whole projections NaN with exit 0.
    for (int64_t i = 0; i < ti->numel(); ++i)
      if (!std::isfinite(host[static_cast<size_t>(off + i)]))
        return Corruption(Str() << st_path << ": tensor '" << ti->name << "' holds " << host[static_cast<size_t>(off + i)]
                                << " at element " << i << ": the adapter is damaged");
    ++expected;
    return Status::OK();
  };
  for (int l = 0; l < static_cast<int>(mc_.num_layers); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto o = off_[idx(l, static_cast<LoraTarget>(t))];
      if (o.first < 0) continue;
      auto [in, out] = lora_target_dims(mc_, static_cast<LoraTarget>(t));
      const auto tt = static_cast<LoraTarget>(t);
      RETURN_IF_ERROR(read_tensor(peft_tensor_name(l, tt, false), {}, {lc_.r, in}, o.first));
      RETURN_IF_ERROR(read_tensor(peft_tensor_name(l, tt, true), {}, {out, lc_.r}, o.second));
      // PEFT saves m without its module's ".weight" suffix; accept it with one too.
      if (lc_.dora)
        RETURN_IF_ERROR(read_tensor(peft_magnitude_name(l, tt), peft_magnitude_name(l, tt) + ".weight", {out},
                                    offset_mag(l, tt)));
    }
  }
  if (f.tensors().size() != expected) {
    for (const TensorInfo& ti : f.tensors()) {
      bool known = false;
      for (int l = 0; l < static_cast<int>(mc_.num_layers) && !known; ++l)
        for (int t = 0; t < kNumLoraTargets && !known; ++t) {
          const auto tt = static_cast<LoraTarget>(t);
          known = lc_.targets[t] && lc_.on_layer(l) && (ti.name == peft_tensor_name(l, tt, false) || ti.name == peft_tensor_name(l, tt, true) ||
                                     (lc_.dora && (ti.name == peft_magnitude_name(l, tt) ||
                                                   ti.name == peft_magnitude_name(l, tt) + ".weight")));
        }
      if (!known) return Unimplemented(Str() << st_path << ": unexpected tensor '" << ti.name << "'");
    }
  }
  params_from_host(host);
  magnitudes_pending_ = false;
  return Status::OK();
}

}  // namespace st
