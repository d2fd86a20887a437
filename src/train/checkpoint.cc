#include "train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/checksum.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "train/train_data.h"

namespace st {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimFile = "optimizer.safetensors";
constexpr int kStateVersion = 1;
const char* const kSections[3] = {"lora.params", "lora.adam_m", "lora.adam_v"};

Tensor section_of(const Lora& lora, int i) {
  return i == 0 ? lora.params() : (i == 1 ? lora.adam_m() : lora.adam_v());
}

std::vector<float> to_host(Backend* be, const Tensor& t) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  be->copy_d2h(h.data(), t.data, t.bytes(), StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  return h;
}

Status remove_tree(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) return IOError(Str() << "removing " << p << ": " << ec.message());
  return Status::OK();
}

Status rename_path(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) return ErrnoError("renaming " + from + " to " + to);
  return Status::OK();
}

// Makes the renames in `dir` durable (a crash right after could otherwise lose them).
void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// A checkpoint-<N> directory: digits after the prefix, nothing else.
bool checkpoint_name(const std::string& name) {
  return name.size() > 11 && name.rfind("checkpoint-", 0) == 0 && name.find_first_not_of("0123456789", 11) == std::string::npos;
}

// What write_checkpoint puts in its temp dir (and the ".tmp.<pid>" partial files of each): a
// directory holding anything else is not one of ours, whatever its name.
bool only_checkpoint_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    bool ours = false;
    for (const char* f : {"adapter_config.json", "adapter_model.safetensors", "optimizer.safetensors", "trainer_state.json", "README.md"})
      ours = ours || n.rfind(f, 0) == 0;
    if (!ours || !e.is_regular_file(ec)) return false;
  }
  return !ec;
}

// Leftover checkpoint-*.tmp.<pid> dirs of processes that no longer run (a kill mid-write).
void remove_stale_temps(const std::string& output_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.find(".tmp.");
    if (name.rfind("checkpoint-", 0) != 0 || at == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid > 0 && pid != getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;  // still alive
    if (pid != getpid() && only_checkpoint_files(e.path())) fs::remove_all(e.path(), ec);
  }
}

// Note [optimizer checksum]: trainer_state.json records a checksum of the three sections'
// bytes (the exact f32 parameters and moments a resume continues from), taken from the host copy
// that is written and checked on the mapped bytes that are loaded: no read-back, no second read.
constexpr const char* kOptimChecksumKey = "optimizer_sections_checksum";

std::string sections_checksum(const void* const (&p)[3], uint64_t bytes_each) {
  uint64_t h[3];
  for (int i = 0; i < 3; ++i) h[i] = checksum64(p[i], bytes_each);
  return checksum_hex(checksum64(h, sizeof h));
}

// Writes the sections; returns their checksum (Note [optimizer checksum]).
StatusOr<std::string> write_optimizer(const std::string& path, const Lora& lora, Backend* be, int64_t step) {
  std::vector<std::vector<float>> host;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 3; ++i) host.push_back(to_host(be, section_of(lora, i)));
  for (int i = 0; i < 3; ++i) tensors.push_back({kSections[i], DType::kF32, {lora.numel()}, host[i].data()});
  RETURN_IF_ERROR(write_safetensors(path, tensors, {{"step", std::to_string(step)}}));
  const void* const p[3] = {host[0].data(), host[1].data(), host[2].data()};
  return sections_checksum(p, static_cast<uint64_t>(lora.numel()) * sizeof(float));
}

// `want`: the checksum trainer_state.json recorded, or null (checkpoints from before it resume
// unchecked).
Status read_optimizer(const std::string& path, Lora* lora, Backend* be, const Json* want, int64_t step) {
  ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  // The step the moments were written at (its metadata) against trainer_state.json's: a damaged
  // global_step used to make a resume skip to the end and exit 0 (session 22 audit).
  if (auto it = f.metadata().find("step"); it != f.metadata().end() && it->second != std::to_string(step))
    return Corruption(Str() << path << " was written at step " << it->second << ", but " << kStateFile
                            << " says global_step " << step << ": the checkpoint is damaged; resume from an "
                            << "earlier checkpoint-N directory instead");
  const TensorInfo* t[3];
  for (int i = 0; i < 3; ++i) {
    t[i] = f.find(kSections[i]);
    if (!t[i]) return Corruption(Str() << path << ": tensor " << kSections[i] << " is missing");
    if (t[i]->dtype != DType::kF32 || t[i]->shape != std::vector<int64_t>{lora->numel()})
      return InvalidArgument(Str() << path << ": tensor " << kSections[i] << " has " << t[i]->numel()
                                   << " elements, this run's LoRA arena has " << lora->numel());
  }
  if (want != nullptr) {
    const void* const p[3] = {f.data(*t[0]), f.data(*t[1]), f.data(*t[2])};
    const std::string got = sections_checksum(p, t[0]->nbytes);
    if (!want->is_string() || want->get<std::string>() != got)
      return Corruption(Str() << path << ": its data checksum " << got << " does not match the one in " << kStateFile
                              << " (" << want->dump() << "): the checkpoint is damaged; resume from an earlier "
                              << "checkpoint-N directory instead");
  }
  for (int i = 0; i < 3; ++i) be->copy_h2d(section_of(*lora, i).data, f.data(*t[i]), t[i]->nbytes, StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  return Status::OK();
}

std::string scalar_text(const Json& v) { return v.is_null() ? "(absent)" : v.dump(); }

}  // namespace

Json trainer_state_to_json(const TrainerState& s) {
  Json j;
  j["version"] = kStateVersion;
  j["global_step"] = s.global_step;
  j["total_steps"] = s.total_steps;
  j["epoch"] = s.epoch;
  j["epoch_started"] = s.epoch_started;
  j["batches_in_epoch"] = s.batches_in_epoch;
  if (s.has_data_position) j["data_position"] = {{"epoch", s.data_position.epoch}, {"index", s.data_position.index}};
  j["micro_batches_run"] = s.micro_batches_run;
  j["lr_schedule_step"] = s.global_step;  // the schedule is a function of the step (lr_schedule.h)
  j["tokens"] = s.tokens;
  j["elapsed_s"] = s.elapsed_s;
  j["logging"] = {{"loss_acc", s.loss_acc}, {"loss_count", s.loss_count}, {"tokens_at_log", s.tokens_at_log},
                  {"elapsed_at_log", s.elapsed_at_log}};
  j["config_fingerprint"] = s.fingerprint;
  j["log_history"] = s.log_history;
  j["best_eval"] = {{"eval_loss", s.best.loss ? Json(*s.best.loss) : Json()},
                    {"step", s.best.step},
                    {"evals_not_improved", s.best.evals_not_improved}};
  return j;
}

namespace {
// A missing or mistyped trainer_state field, named.
struct FieldError {
  std::string message;
};
template <class T>
T field(const Json& o, const char* key, const char* parent = nullptr) {
  try {
    return o.at(key).get<T>();
  } catch (const Json::exception& e) {
    throw FieldError{Str() << "field '" << (parent ? std::string(parent) + "." : std::string()) << key << "': " << e.what()};
  }
}
}  // namespace

StatusOr<TrainerState> trainer_state_from_json(const Json& j, const std::string& what) {
  TrainerState s;
  try {
    if (j.value("version", 0) != kStateVersion)
      return InvalidArgument(Str() << what << ": unsupported trainer_state version " << j.value("version", 0));
    s.global_step = field<int64_t>(j, "global_step");
    s.total_steps = field<int64_t>(j, "total_steps");
    s.epoch = field<int64_t>(j, "epoch");
    s.epoch_started = field<bool>(j, "epoch_started");
    s.batches_in_epoch = field<int64_t>(j, "batches_in_epoch");
    s.has_data_position = j.contains("data_position");
    if (s.has_data_position) {
      s.data_position.epoch = field<int64_t>(j["data_position"], "epoch", "data_position");
      s.data_position.index = field<int64_t>(j["data_position"], "index", "data_position");
    }
    // get<uint64_t>() would wrap a negative count; nlohmann marks non-negative integers unsigned.
    if (!j.contains("micro_batches_run") || !j["micro_batches_run"].is_number_unsigned())
      return Corruption(Str() << what << ": field 'micro_batches_run' must be a non-negative integer, got "
                              << j.value("micro_batches_run", Json()).dump());
    s.micro_batches_run = j["micro_batches_run"].get<uint64_t>();
    s.tokens = field<int64_t>(j, "tokens");
    s.elapsed_s = field<double>(j, "elapsed_s");
    const Json lg = field<Json>(j, "logging");
    s.loss_acc = field<double>(lg, "loss_acc", "logging");
    s.loss_count = field<int64_t>(lg, "loss_count", "logging");
    s.tokens_at_log = field<int64_t>(lg, "tokens_at_log", "logging");
    s.elapsed_at_log = field<double>(lg, "elapsed_at_log", "logging");
    s.fingerprint = field<Json>(j, "config_fingerprint");
    s.log_history = j.value("log_history", Json::array());
    if (j.contains("best_eval")) {
      const Json& b = j["best_eval"];
      const Json loss = field<Json>(b, "eval_loss", "best_eval");
      if (!loss.is_null()) s.best.loss = field<double>(b, "eval_loss", "best_eval");
      s.best.step = field<int64_t>(b, "step", "best_eval");
      s.best.evals_not_improved = field<int64_t>(b, "evals_not_improved", "best_eval");
      if (s.best.step < 0 || s.best.evals_not_improved < 0 || s.best.step > s.global_step)
        return Corruption(Str() << what << ": best_eval: step " << s.best.step << " / count " << s.best.evals_not_improved
                                << " out of range (global_step " << s.global_step << ")");
    }
  } catch (const FieldError& e) {
    return Corruption(Str() << what << ": " << e.message);
  } catch (const Json::exception& e) {
    return Corruption(Str() << what << ": " << e.what());
  }
  // The trainer appends to log_history and writes each entry back out: anything but an array of
  // objects would throw there, after the run has trained.
  if (!s.log_history.is_array())
    return Corruption(Str() << what << ": log_history must be an array, got " << s.log_history.type_name());
  for (const Json& e : s.log_history)
    if (!e.is_object()) return Corruption(Str() << what << ": log_history holds a " << e.type_name() << ", not an object");
  if (s.global_step < 0 || s.epoch < 0 || s.batches_in_epoch < 0 || s.total_steps < 0 || s.tokens < 0 ||
      s.loss_count < 0 || s.tokens_at_log < 0 || s.data_position.epoch < 0 || s.data_position.index < 0)
    return Corruption(Str() << what << ": negative step / epoch / position / token count");
  return s;
}

Json config_fingerprint(const TrainConfig& tc, const ModelConfig& mc, DType act_dtype, int64_t batches_per_epoch) {
  Json j;
  j["model.arch"] = arch_name(mc.arch);
  j["model.num_layers"] = mc.num_layers;
  j["model.hidden_size"] = mc.hidden_size;
  j["model.intermediate_size"] = mc.intermediate_size;
  j["model.num_heads"] = mc.num_heads;
  j["model.num_kv_heads"] = mc.num_kv_heads;
  j["model.head_dim"] = mc.head_dim;
  j["model.vocab_size"] = mc.vocab_size;
  j["model.tie_word_embeddings"] = mc.tie_word_embeddings;
  j["adapter"] = tc.adapter;
  j["lora_r"] = tc.lora_r;
  j["lora_alpha"] = tc.lora_alpha;
  j["lora_dropout"] = tc.lora_dropout;
  if (tc.use_rslora) j["use_rslora"] = true;  // only when set: checkpoints from before the key resume
  if (tc.use_dora) j["use_dora"] = true;
  Json targets = Json::array();
  auto parsed = parse_lora_targets(tc.lora_target_linear ? std::vector<std::string>{"all-linear"} : tc.lora_target_modules);
  if (parsed.ok())
    for (LoraTarget t : *parsed) targets.push_back(lora_target_name(t));
  std::sort(targets.begin(), targets.end());
  j["lora_target_modules"] = targets;
  if (!tc.peft_layers_to_transform.empty()) j["peft_layers_to_transform"] = tc.peft_layers_to_transform;  // only when set
  j["dtype"] = tc.dtype;
  j["compute_dtype"] = dtype_name(act_dtype);
  j["sequence_len"] = tc.sequence_len;
  j["micro_batch_size"] = tc.micro_batch_size;
  j["gradient_accumulation_steps"] = tc.gradient_accumulation_steps;
  j["loss_normalization"] = tc.loss_normalization;
  j["sample_packing"] = tc.sample_packing;
  if (padding_free_on(tc)) j["padding_free"] = true;  // only when on: earlier checkpoints resume
  j["shuffle"] = tc.shuffle;
  j["seed"] = tc.seed;
  j["learning_rate"] = tc.learning_rate;
  j["lr_scheduler"] = tc.lr_scheduler;
  if (tc.cosine_min_lr_ratio > 0) j["cosine_min_lr_ratio"] = tc.cosine_min_lr_ratio;
  // lr_scheduler_kwargs, only where set: earlier checkpoints resume.
  if (tc.lr_num_cycles >= 0) j["lr_num_cycles"] = tc.lr_num_cycles;
  if (tc.lr_end >= 0) j["lr_end"] = tc.lr_end;
  if (tc.lr_power >= 0) j["lr_power"] = tc.lr_power;
  if (tc.lr_timescale >= 0) j["lr_timescale"] = tc.lr_timescale;
  if (tc.min_lr >= 0) j["min_lr"] = tc.min_lr;
  j["warmup_steps"] = tc.warmup_steps;
  j["weight_decay"] = tc.weight_decay;
  if (tc.loraplus_lr_ratio > 0) j["loraplus_lr_ratio"] = tc.loraplus_lr_ratio;
  if (tc.neftune_noise_alpha > 0) j["neftune_noise_alpha"] = tc.neftune_noise_alpha;  // only when set: earlier checkpoints resume
  if (!tc.rl.empty()) {  // only when set: earlier checkpoints resume
    j["rl"] = tc.rl;
    j["rl_beta"] = tc.rl_beta;
    j["dpo_label_smoothing"] = tc.dpo_label_smoothing;
    if (tc.dpo_loss_type != "sigmoid") j["dpo_loss_type"] = tc.dpo_loss_type;  // only when set: earlier checkpoints resume
    if (tc.rpo_alpha > 0) j["rpo_alpha"] = tc.rpo_alpha;
    if (tc.dpo_loss_type == "discopop") j["discopop_tau"] = tc.discopop_tau;
    if (tc.rl == "simpo") {
      j["simpo_gamma"] = tc.simpo_gamma;
      j["cpo_alpha"] = tc.cpo_alpha;
    }
    if (tc.max_prompt_len > 0) j["max_prompt_len"] = tc.max_prompt_len;
    if (tc.rl == "kto") {
      j["kto_desirable_weight"] = tc.kto_desirable_weight;
      j["kto_undesirable_weight"] = tc.kto_undesirable_weight;
    }
  }
  j["adam_beta1"] = tc.adam_beta1;
  j["adam_beta2"] = tc.adam_beta2;
  j["adam_epsilon"] = tc.adam_epsilon;
  j["max_grad_norm"] = tc.max_grad_norm;
  j["train_micro_batches_per_epoch"] = batches_per_epoch;
  return j;
}

Status check_fingerprint(const Json& saved, const Json& now, const std::string& ckpt_dir) {
  if (!saved.is_object()) return Corruption(Str() << ckpt_dir << "/" << kStateFile << ": no config_fingerprint");
  std::map<std::string, std::pair<Json, Json>> diffs;
  for (auto it = now.begin(); it != now.end(); ++it) {
    Json old = saved.contains(it.key()) ? saved[it.key()] : Json();
    if (old != it.value()) diffs[it.key()] = {old, it.value()};
  }
  for (auto it = saved.begin(); it != saved.end(); ++it)
    if (!now.contains(it.key())) diffs[it.key()] = {it.value(), Json()};
  if (diffs.empty()) return Status::OK();
  Str msg;
  msg << "checkpoint " << ckpt_dir << " was written by a different model or config; refusing to resume ("
      << diffs.size() << " difference" << (diffs.size() > 1 ? "s" : "") << "):";
  for (const auto& [k, v] : diffs)
    msg << "\n  " << k << ": checkpoint " << scalar_text(v.first) << ", this run " << scalar_text(v.second);
  return InvalidArgument(msg);
}

std::string checkpoint_dir(const std::string& output_dir, int64_t step) {
  return path_join(output_dir, Str() << "checkpoint-" << step);
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!checkpoint_name(name)) continue;  // also skips .tmp / .old
    if (!file_exists(path_join(e.path().string(), kStateFile))) continue;
    int64_t step = 0;  // a name past int64 is nobody's step (std::stoll threw: session 23 audit)
    const char* first = name.data() + 11;
    if (std::from_chars(first, name.data() + name.size(), step).ec != std::errc()) continue;
    out.emplace_back(step, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::string> resolve_resume_checkpoint(const std::string& spec, const std::string& output_dir) {
  if (spec == "true" || spec == "True" || spec == "latest" || spec == "auto") {
    auto all = list_checkpoints(output_dir);
    if (all.empty() && spec == "auto") return std::string();
    if (all.empty())
      return NotFound(Str() << "resume_from_checkpoint: true, but " << output_dir
                            << " holds no complete checkpoint-N directory");
    return all.back().second;
  }
  if (!file_exists(path_join(spec, kStateFile)))
    return NotFound(Str() << "resume_from_checkpoint: " << spec << " is not a checkpoint (no " << kStateFile << ")");
  return spec;
}

namespace {

// Replaceable as a checkpoint: absent, empty, or holding a trainer_state.json.
bool replaceable_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return !fs::exists(dir, ec) || (fs::is_directory(dir, ec) && (fs::is_empty(dir, ec) || fs::exists(dir / kStateFile, ec)));
}

}  // namespace

Status check_output_dir(const TrainConfig& tc) {
  const std::string& out = tc.output_dir;
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    return InvalidArgument(Str() << "output_dir " << out << " exists and is not a directory");
  if (!tc.base_model.empty() && path_is_within(tc.base_model, out))
    return InvalidArgument(Str() << "output_dir " << out << " holds the base model (" << tc.base_model
                                 << "); the run writes its adapter, metrics and checkpoints there: choose another");
  for (const auto* list : {&tc.datasets, &tc.eval_datasets})
    for (const DatasetSpec& d : *list) {
      std::vector<std::string> paths = d.files;
      if (paths.empty()) paths.push_back(d.path);
      for (const std::string& p : paths)
        if (path_is_within(p, out))
          return InvalidArgument(Str() << "output_dir " << out << " holds the dataset " << p
                                       << "; the run writes metrics.jsonl, adapter files and checkpoints there: choose another");
    }
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (checkpoint_name(name) && !replaceable_checkpoint(e.path()))
      return InvalidArgument(Str() << "output_dir " << out << " holds " << name << ", which is not a checkpoint (no "
                                   << kStateFile << "); the run would replace it when it saves that step: move it away");
  }
  return Status::OK();
}

StatusOr<std::string> write_checkpoint(const std::string& output_dir, const Lora& lora, Backend* be,
                                       const std::string& base_model_name, const TrainerState& state) {
  RETURN_IF_ERROR(make_dirs(output_dir));
  remove_stale_temps(output_dir);
  const std::string final_dir = checkpoint_dir(output_dir, state.global_step);
  const std::string tmp = final_dir + ".tmp." + std::to_string(getpid());
  RETURN_IF_ERROR(remove_tree(tmp));
  RETURN_IF_ERROR(lora.save_peft(tmp, base_model_name), "checkpoint adapter");
  ASSIGN_OR_RETURN(std::string optim_sum, write_optimizer(path_join(tmp, kOptimFile), lora, be, state.global_step));
  Json sj = trainer_state_to_json(state);
  sj[kOptimChecksumKey] = optim_sum;
  // trainer_state.json last: list_checkpoints treats a dir without it as incomplete.
  RETURN_IF_ERROR(write_file_atomic(path_join(tmp, kStateFile), sj.dump(1) + "\n"));
  fsync_dir(tmp);
  if (!replaceable_checkpoint(final_dir)) {  // check_output_dir's rule, again at the moment of replacing
    remove_tree(tmp).ignore_error();
    return InvalidArgument(Str() << final_dir << " exists and is not a checkpoint (no " << kStateFile
                                 << "); not replacing it");
  }
  if (is_directory(final_dir)) {
    const std::string old = final_dir + ".old." + std::to_string(getpid());
    RETURN_IF_ERROR(remove_tree(old));
    RETURN_IF_ERROR(rename_path(final_dir, old));
    RETURN_IF_ERROR(rename_path(tmp, final_dir));
    RETURN_IF_ERROR(remove_tree(old));
  } else {
    RETURN_IF_ERROR(rename_path(tmp, final_dir));
  }
  fsync_dir(output_dir);
  return final_dir;
}

StatusOr<TrainerState> read_checkpoint(const std::string& dir, const Json& expect, Lora* lora, Backend* be) {
  const std::string state_path = path_join(dir, kStateFile);
  ASSIGN_OR_RETURN(Json j, read_json_file(state_path));
  ASSIGN_OR_RETURN(TrainerState s, trainer_state_from_json(j, state_path));
  RETURN_IF_ERROR(check_fingerprint(s.fingerprint, expect, dir));
  // checkpoint-N holds step N (checkpoint_dir()); a renamed directory is not checked.
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::string base = path_basename(trimmed);
  if (checkpoint_name(base) && base.substr(11) != std::to_string(s.global_step))
    return Corruption(Str() << state_path << ": global_step " << s.global_step << " in a directory named " << base
                            << ": the checkpoint is damaged; resume from an earlier checkpoint-N directory instead");
  if (j.contains("lr_schedule_step") && j["lr_schedule_step"] != Json(s.global_step))
    return Corruption(Str() << state_path << ": lr_schedule_step " << j["lr_schedule_step"].dump()
                            << " differs from global_step " << s.global_step);
  RETURN_IF_ERROR(read_optimizer(path_join(dir, kOptimFile), lora, be,
                                 j.contains(kOptimChecksumKey) ? &j[kOptimChecksumKey] : nullptr, s.global_step));
  return s;
}

Status prune_checkpoints(const std::string& output_dir, int64_t limit, int64_t keep_step, int64_t best_step) {
  if (limit <= 0) return Status::OK();
  auto all = list_checkpoints(output_dir);
  int64_t n = static_cast<int64_t>(all.size());
  for (const auto& [step, path] : all) {
    if (n <= limit) break;
    if (step == keep_step || (best_step > 0 && step == best_step)) continue;
    RETURN_IF_ERROR(remove_tree(path), "save_total_limit");
    --n;
  }
  return Status::OK();
}

std::string saved_tokenizer_dir(const std::string& adapter_dir) {
  auto holds = [](const std::string& d) {
    return file_exists(path_join(d, "tokenizer.json")) || file_exists(path_join(d, "tokenizer.model"));
  };
  if (holds(adapter_dir)) return adapter_dir;
  fs::path p = fs::path(adapter_dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/checkpoint-1/"
  if (!checkpoint_name(p.filename().string())) return "";
  const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
  return holds(parent) ? parent : "";
}

}  // namespace st
