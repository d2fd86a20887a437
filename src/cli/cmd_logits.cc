// `streamtune logits --model M [--adapter DIR] (--ids 1,2,3 | --ids-file F.jsonl) --out F.safetensors`
// Runs the training forward (model/model.h, no dropout) on each row and writes its full-sequence
// logits [T, V] f32 as "logits_<i>" in a safetensors file. The oracle hook for comparisons with
// transformers + PEFT (tools/ref/peft_compat.py): it is the same forward the trainer
// differentiates, not the decoder's, so a match proves the adapter means the same thing in both.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/cli_args.h"
#include "core/check.h"
#include "core/file.h"
#include "core/json.h"
#include "data/batch.h"
#include "io/safetensors.h"
#include "model/load.h"
#include "model/lora.h"
#include "model/model.h"

namespace st {
namespace {

constexpr const char* kUsage =
    "usage: streamtune logits --model M [--adapter DIR] (--ids 1,2,3 | --ids-file F.jsonl) --out F [options]\n"
    "\n"
    "Writes the full-sequence logits [T, V] (float32) of each row as tensor \"logits_<i>\" of a\n"
    "safetensors file, computed by the training forward (eval mode: no dropout).\n"
    "\n"
    "  --model M            base model: HF checkpoint directory or .gguf file\n"
    "  --adapter DIR        PEFT LoRA adapter to apply (adapter_config.json + adapter_model.safetensors)\n"
    "  --ids LIST           one row of token ids, comma separated\n"
    "  --ids-file F         JSONL: one row per line, {\"input_ids\": [...]} or a bare [...] list\n"
    "  --out F              output .safetensors file (written atomically)\n"
    "  --device D           auto (default) | cpu | cuda\n"
    "  --dtype D            weights/activations: bfloat16 (default on cuda) | float32 (default on cpu)\n";

int usage(const std::string& msg) {
  std::fprintf(stderr, "streamtune: error: %s\nsee 'streamtune logits --help'\n", msg.c_str());
  return 2;
}
int fail(const Status& s) {
  std::fprintf(stderr, "streamtune: error: %s\n", s.message().c_str());
  return 1;
}

StatusOr<std::vector<int32_t>> parse_id_list(const std::string& s, const std::string& what) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find(',', i) == std::string::npos ? s.size() : s.find(',', i);
    const std::string tok = s.substr(i, j - i);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(tok, &used);
    } catch (...) {
      used = 0;
    }
    if (tok.empty() || used != tok.size() || v < 0 || v > INT32_MAX)
      return InvalidArgument(Str() << what << ": '" << tok << "' is not a token id");
    out.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return out;
}

StatusOr<std::vector<int32_t>> row_from_json(const Json& j, const std::string& what) {
  const Json* arr = &j;
  if (j.is_object()) {
    if (!j.contains("input_ids")) return InvalidArgument(Str() << what << ": no \"input_ids\" key");
    arr = &j["input_ids"];
  }
  if (!arr->is_array() || arr->empty()) return InvalidArgument(Str() << what << ": expected a non-empty id list");
  std::vector<int32_t> out;
  for (const Json& e : *arr) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      return InvalidArgument(Str() << what << ": " << e.dump() << " is not a token id");
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return out;
}

StatusOr<std::vector<std::vector<int32_t>>> read_rows(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  std::vector<std::vector<int32_t>> rows;
  size_t start = 0, line = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line;
    const std::string l = text.substr(start, end - start);
    start = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string what = Str() << path << " line " << line;
    ASSIGN_OR_RETURN(Json j, parse_json(l, what));
    ASSIGN_OR_RETURN(std::vector<int32_t> r, row_from_json(j, what));
    rows.push_back(std::move(r));
  }
  if (rows.empty()) return InvalidArgument(Str() << path << ": no rows");
  return rows;
}

// Base + optional adapter resident on one backend, and a Model sized for the longest row.
struct Engine {
  std::unique_ptr<Backend> be;
  std::unique_ptr<LoadedModel> lm;
  std::unique_ptr<Model> model;
};

StatusOr<Engine> build_engine(const ParsedArgs& a, DeviceKind kind, DType dtype, int64_t max_tokens) {
  Engine e;
  ASSIGN_OR_RETURN(e.be, make_backend(kind));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, open_model_source(a.get("model")));
  ASSIGN_OR_RETURN(e.lm, load_model_resident(e.be.get(), *src, dtype));
  LoraConfig lc;  // no targets: the base model alone
  if (a.has("adapter")) {
    ASSIGN_OR_RETURN(lc, read_peft_config(a.get("adapter")));
  }
  ModelOptions mo;
  mo.act_dtype = dtype;
  mo.max_tokens = max_tokens;
  ASSIGN_OR_RETURN(e.model, Model::create(e.lm->config, e.be.get(), lc, mo),
                   (a.has("adapter") ? path_join(a.get("adapter"), "adapter_config.json") : std::string("model")));
  if (a.has("adapter")) RETURN_IF_ERROR(e.model->lora().load_peft(a.get("adapter")));
  // The Model owns its extras; both layouts are make_extras_layout(config, dtype), so copy bytes.
  CHECK(e.model->extras_layout().bytes == e.lm->extras_layout.bytes);
  std::vector<char> host(e.lm->extras_layout.bytes);
  e.be->copy_d2h(host.data(), e.lm->extras_blob, host.size(), StreamId::kCompute);
  e.be->sync_stream(StreamId::kCompute);
  e.model->load_extras_from_host(host.data());
  return e;
}

StatusOr<std::vector<std::vector<float>>> run_rows(Engine& e, const std::vector<std::vector<int32_t>>& rows) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    Batch b;
    b.batch = 1;
    b.seq = static_cast<int64_t>(rows[i].size());
    b.input_ids = rows[i];
    b.labels.assign(rows[i].size(), kIgnoreIndex);
    RETURN_IF_ERROR(check_rope_positions(e.lm->config, b.seq, (Str() << "row " << i).str()));
    ASSIGN_OR_RETURN(std::vector<float> l, e.model->forward_logits(b, *e.lm->layers), "row " << i);
    out.push_back(std::move(l));
  }
  return out;
}

int run(const ParsedArgs& a) {
  if (!a.has("model")) return usage("missing --model M");
  if (!a.has("out") || a.get("out").empty()) return usage("missing --out F");
  if (a.has("ids") == a.has("ids-file")) return usage("give exactly one of --ids LIST or --ids-file F");
  // --out never lands on or inside an input: over the base's safetensors it destroyed the model,
  // and a new .safetensors beside a model's or adapter's would be read as part of it next time.
  for (const char* input : {"model", "adapter", "ids-file"})
    if (a.has(input) && path_is_within(a.get("out"), a.get(input)))
      return usage(std::string("--out ") + a.get("out") + " is or lies inside --" + input + " " + a.get(input) +
                   "; write the logits elsewhere");
  const std::string dev = a.get("device", "auto");
  if (dev != "auto" && dev != "cpu" && dev != "cuda") return usage("--device: auto | cpu | cuda");
  const DeviceKind kind = dev == "cuda" || (dev == "auto" && cuda_available()) ? DeviceKind::kCuda : DeviceKind::kCpu;
  StatusOr<DType> dtype = dtype_from_user(a.get("dtype", kind == DeviceKind::kCuda ? "bfloat16" : "float32"));
  if (!dtype.ok()) return usage("--dtype: " + dtype.status().message());
  if (*dtype != DType::kF32 && *dtype != DType::kBF16) return usage("--dtype: bfloat16 | float32");

  std::vector<std::vector<int32_t>> rows;
  if (a.has("ids")) {
    StatusOr<std::vector<int32_t>> r = parse_id_list(a.get("ids"), "--ids");
    if (!r.ok()) return usage(r.status().message());
    rows.push_back(std::move(r).value());
  } else {
    StatusOr<std::vector<std::vector<int32_t>>> r = read_rows(a.get("ids-file"));
    if (!r.ok()) return fail(r.status());
    rows = std::move(r).value();
  }
  int64_t max_t = 0;
  for (const auto& r : rows) max_t = std::max<int64_t>(max_t, static_cast<int64_t>(r.size()));

  StatusOr<Engine> e = build_engine(a, kind, *dtype, max_t);
  if (!e.ok()) return fail(e.status());
  StatusOr<std::vector<std::vector<float>>> logits = run_rows(*e, rows);
  if (!logits.ok()) return fail(logits.status());

  const int64_t V = e->lm->config.vocab_size;
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < rows.size(); ++i)
    tensors.push_back({"logits_" + std::to_string(i), DType::kF32, {static_cast<int64_t>(rows[i].size()), V},
                       (*logits)[i].data()});
  if (Status s = write_safetensors(a.get("out"), tensors); !s.ok()) return fail(s);
  std::printf("wrote logits of %zu row(s) [T, %lld] (%s, %s) to %s\n", rows.size(), static_cast<long long>(V),
              device_kind_name(kind), dtype_name(*dtype), a.get("out").c_str());
  return 0;
}

}  // namespace

// argv[0] is the subcommand name ("logits"); flags follow. 0 ok, 1 runtime error, 2 usage.
int cmd_logits(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  StatusOr<ParsedArgs> a = parse_flags(args, {{"model"}, {"adapter"}, {"ids"}, {"ids-file"}, {"out"},
                                              {"device"}, {"dtype"}});
  if (!a.ok()) return usage(a.status().message());
  if (!a->positional.empty()) return usage("unexpected argument '" + a->positional[0] + "'");
  if (!resolve_model_flag(&*a)) return 1;
  return run(*a);
}

}  // namespace st
