// Oracle: hand-written YAML snippets with the TrainConfig values / error messages they must give.
#include "cli/config_yaml.h"
#include "core/byte_size.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/file.h"

namespace st {
namespace {

StatusOr<TrainConfig> parse(const std::string& y, const std::string& base = "/base") {
  return parse_train_config_yaml(y, "cfg.yaml", base);
}

// The error message of parsing `y`, which must fail with `code`.
std::string error_of(const std::string& y, StatusCode code = StatusCode::kInvalidArgument) {
  auto r = parse(y);
  EXPECT_FALSE(r.ok()) << y;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  return r.status().message();
}

std::string override_error(const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
  TrainConfig c;
  Status s = apply_train_override(c, arg);
  EXPECT_FALSE(s.ok()) << arg;
  EXPECT_EQ(s.code(), code) << s.to_string();
  return s.message();
}

#define EXPECT_HAS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << (hay)

TEST(ConfigYaml, FullConfig) {
  auto r = parse(R"(
base_model: models/smol
dtype: float32
device: cpu
datasets:
  - path: data/train.jsonl
    type: messages
  - path: /abs/more.jsonl
  - extra.jsonl
sequence_len: 512
shuffle: false
sample_packing: yes
chat_template: chatml
val_set_size: 0.05
adapter: lora
lora_r: 16
lora_alpha: 32
lora_dropout: 0.05
lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
learning_rate: 2.0e-4
lr_scheduler: linear
warmup_steps: 10
micro_batch_size: 4
gradient_accumulation_steps: 2
max_steps: 100
seed: 18446744073709551615
output_dir: ./out/run1
resume_from_checkpoint: true
stream: disk
stream_buffers: 3
vram_budget: 4GiB
use_dora: false
peft_type: LORA
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const TrainConfig& c = *r;
  EXPECT_EQ(c.base_model, "/base/models/smol");
  EXPECT_EQ(c.dtype, "float32");
  EXPECT_EQ(c.device, "cpu");
  ASSERT_EQ(c.datasets.size(), 3u);
  EXPECT_EQ(c.datasets[0].path, "/base/data/train.jsonl");
  EXPECT_EQ(c.datasets[0].type, "messages");
  EXPECT_EQ(c.datasets[1].path, "/abs/more.jsonl");
  EXPECT_EQ(c.datasets[1].type, "tokenized");
  EXPECT_EQ(c.datasets[2].path, "/base/extra.jsonl");
  EXPECT_EQ(c.sequence_len, 512);
  EXPECT_FALSE(c.shuffle);
  EXPECT_TRUE(c.sample_packing);
  EXPECT_EQ(c.chat_template, "chatml");
  EXPECT_DOUBLE_EQ(c.val_set_size, 0.05);
  EXPECT_EQ(c.lora_r, 16);
  EXPECT_DOUBLE_EQ(c.lora_alpha, 32);
  EXPECT_DOUBLE_EQ(c.lora_dropout, 0.05);
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}));
  EXPECT_DOUBLE_EQ(c.learning_rate, 2e-4);
  EXPECT_EQ(c.lr_scheduler, "linear");
  EXPECT_EQ(c.warmup_steps, 10);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.max_steps, 100);
  EXPECT_EQ(c.seed, 18446744073709551615ull);
  EXPECT_EQ(c.output_dir, "/base/out/run1");
  EXPECT_EQ(c.resume_from_checkpoint, "true");
  EXPECT_EQ(c.stream, "disk");
  EXPECT_EQ(c.stream_buffers, 3);
  EXPECT_EQ(c.vram_budget, "4GiB");
  // Untouched keys keep the TrainConfig defaults.
  EXPECT_EQ(c.num_epochs, 1);
  EXPECT_DOUBLE_EQ(c.adam_beta2, 0.999);
}

TEST(ConfigYaml, LrSchedulerKwargs) {  // HF's scheduler_specific_kwargs, as axolotl passes them
  auto c = parse_train_config_yaml(
      "lr_scheduler: cosine_with_restarts\nlr_scheduler_kwargs:\n  num_cycles: 3\n", "cfg.yaml", "/base");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->lr_scheduler, "cosine_with_restarts");
  EXPECT_DOUBLE_EQ(c->lr_num_cycles, 3);
  EXPECT_NE(train_config_to_yaml(*c).find("lr_scheduler_kwargs: {num_cycles: 3}"), std::string::npos)
      << train_config_to_yaml(*c);
  auto p = parse_train_config_yaml("lr_scheduler: polynomial\nlr_scheduler_kwargs: {lr_end: 1e-6, power: 2}\n",
                                   "cfg.yaml", "/base");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_DOUBLE_EQ(p->lr_end, 1e-6);
  EXPECT_DOUBLE_EQ(p->lr_power, 2);
  auto m = parse_train_config_yaml("lr_scheduler: cosine_with_min_lr\nlr_scheduler_kwargs: {min_lr_rate: 0.1}\n",
                                   "cfg.yaml", "/base");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_DOUBLE_EQ(m->cosine_min_lr_ratio, 0.1);
}

TEST(ConfigYaml, ModulesCommaFormAndAllLinear) {
  auto r = parse("lora_target_modules: 'q_proj, v_proj,down_proj'\n");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->lora_target_modules, (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));
  r = parse("lora_target_modules: all-linear\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lora_target_modules.size(), 7u);
  EXPECT_HAS(error_of("lora_target_modules: [q_proj, v_prj]\n"), "unknown module 'v_prj' (did you mean 'v_proj'?)");
}

TEST(ConfigYaml, ChatTemplateNameOrJinjaFile) {
  auto r = parse("chat_template: tpl/mine.jinja\n");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->chat_template, "/base/tpl/mine.jinja");  // relative to the config, like other paths
  r = parse("chat_template: Llama3\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chat_template, "llama3");
  EXPECT_HAS(error_of("chat_template: vicuna\n"), "or a template file (*.jinja)");
}

TEST(ConfigYaml, MalformedYamlNamesLineAndColumn) {
  const std::string m = error_of("base_model: m\nlora_r: 8\ndatasets: [a, b\nseed: 1\n");
  EXPECT_HAS(m, "cfg.yaml:");
  EXPECT_HAS(m, "malformed YAML");
  const std::string m2 = error_of("base_model: m\nlora_r: 8\n  bad: indent\n");
  EXPECT_HAS(m2, "cfg.yaml:3:");
  EXPECT_HAS(error_of("- a\n- b\n"), "expected a mapping");
}

TEST(ConfigYaml, UnknownKeySuggestsClosest) {
  const std::string m = error_of("base_model: m\nlerning_rate: 1e-4\n");
  EXPECT_HAS(m, "cfg.yaml:2:1: unknown key 'lerning_rate' (did you mean 'learning_rate'?)");
  EXPECT_HAS(error_of("lora_rank: 8\n"), "did you mean 'lora_r'?");
  // Far from everything: still names the closest key.
  EXPECT_HAS(error_of("zzzzzzzzzzzzzz: 1\n"), "closest known key");
  EXPECT_HAS(error_of("datasets:\n  - path: a\n    typ: text\n"), "unknown dataset key 'typ' in datasets (did you mean 'type'?)");
}

TEST(ConfigYaml, BadValuesNameTheKey) {
  EXPECT_HAS(error_of("dtype: float8\n"), "cfg.yaml:1:1: key 'dtype': 'float8' is not one of: bfloat16, float32");
  EXPECT_HAS(error_of("x: 1\n", StatusCode::kInvalidArgument), "unknown key 'x'");
  EXPECT_HAS(error_of("seed: 1\nlr_scheduler: foo\n"), "cfg.yaml:2:1: key 'lr_scheduler': 'foo' is not one of: constant, constant_with_warmup, linear, cosine");
  EXPECT_HAS(error_of("lr_scheduler_kwargs: {num_cycles: 2, cycles: 3}\n"), "lr_scheduler_kwargs: unknown kwarg 'cycles'");
  EXPECT_HAS(error_of("lr_scheduler_kwargs: {lr_end: abc}\n"), "lr_scheduler_kwargs.lr_end: expected a number >= 0, got 'abc'");
  EXPECT_HAS(error_of("lr_scheduler_kwargs: 3\n"), "key 'lr_scheduler_kwargs': expected a mapping");
  EXPECT_HAS(error_of("lora_r: -4\n"), "key 'lora_r': must be in [1, 65536], got -4");
  EXPECT_HAS(error_of("stream: xyz\n"), "key 'stream': 'xyz' is not one of: off, ram, disk");
  EXPECT_HAS(error_of("learning_rate: fast\n"), "key 'learning_rate': expected a number, got 'fast'");
  EXPECT_HAS(error_of("learning_rate: 0\n"), "key 'learning_rate': must be > 0");
  EXPECT_HAS(error_of("lora_dropout: 1.0\n"), "key 'lora_dropout': must be in [0, 1)");
  EXPECT_HAS(error_of("shuffle: maybe\n"), "key 'shuffle': expected true or false");
  EXPECT_HAS(error_of("lora_r: 8.5\n"), "key 'lora_r': expected an integer, got '8.5'");
  EXPECT_HAS(error_of("lora_r: [8]\n"), "key 'lora_r': expected a single value");
  EXPECT_HAS(error_of("seed: -1\n"), "key 'seed': expected a non-negative integer");
  EXPECT_HAS(error_of("vram_budget: lots\n"), "key 'vram_budget'");
  EXPECT_HAS(error_of("datasets:\n  - path: a\n    type: csv\n"), "cfg.yaml:3:5: datasets.type: 'csv' is not one of");
  EXPECT_HAS(error_of("datasets: a.jsonl\n"), "key 'datasets': expected a list");
  EXPECT_HAS(error_of("lora_r: 8\nlora_r: 16\n"), "cfg.yaml:2:1: key 'lora_r' is set twice");
}

TEST(ConfigYaml, UnsupportedLoraVariantsAreRefusedByName) {
  const StatusCode kU = StatusCode::kUnimplemented;
  EXPECT_HAS(error_of("peft_type: vera\n", kU), "adapter type 'vera' is not supported");
  EXPECT_HAS(error_of("lora_init: pissa\n", kU), "key 'lora_init': LoRA initialisation 'pissa' is not supported");
  EXPECT_HAS(error_of("init_lora_weights: olora\n", kU), "'olora' is not supported");
  EXPECT_HAS(error_of("adapter: dora\n"), "DoRA is 'adapter: lora' (or qlora) with 'use_dora: true'");
  EXPECT_HAS(error_of("adapter: banana\n"), "key 'adapter': 'banana' is not one of: lora, qlora");
  // Asking for plain LoRA through those keys is fine.
  EXPECT_TRUE(parse("use_dora: false\nuse_rslora: no\nlora_init: true\npeft_type: lora\n").ok());
}

TEST(ConfigYaml, ForeignKeysAreNotedMappedOrRefused) {  // cli/foreign_keys.h Note [foreign keys]
  auto c = parse("wandb_project: x\nflash_attention: true\nbf16: true\noptimizer: adamw_torch\n"
                 "lora_target_linear: true\nsave_strategy: epoch\nauto_resume_from_checkpoints: true\n"
                 "special_tokens:\nfp16: false\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_HAS(c->notes[0], "wandb_project, flash_attention");
  EXPECT_EQ(c->dtype, "bfloat16");
  EXPECT_TRUE(c->lora_target_linear);
  EXPECT_EQ(c->saves_per_epoch, 1);
  EXPECT_EQ(c->resume_from_checkpoint, "auto");
  auto f = parse("bf16: false\noptimizer: paged_adamw_8bit\n");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dtype, "float32");
  ASSERT_EQ(f->notes.size(), 1u);
  EXPECT_HAS(f->notes[0], "runs as 32-bit AdamW");
  const StatusCode kU = StatusCode::kUnimplemented;
  EXPECT_HAS(error_of("fp16: true\n", kU), "key 'fp16' = 'true': float16 training is not supported");
  EXPECT_HAS(error_of("optimizer: lion_8bit\n", kU), "only AdamW is supported");
  EXPECT_TRUE(parse("optimizer:\n").ok());  // axolotl's default: AdamW
  EXPECT_HAS(error_of("lora_modules_to_save: [lm_head]\n", kU), "modules_to_save");
  auto sp = parse("special_tokens:\n  pad_token: \"<|end_of_text|>\"\n  eos_token: \"<|im_end|>\"\n");
  ASSERT_TRUE(sp.ok()) << sp.status().to_string();  // checked against the tokenizer when it loads
  EXPECT_EQ(sp->special_tokens.pad, "<|end_of_text|>");
  EXPECT_EQ(sp->special_tokens.eos, "<|im_end|>");
  EXPECT_HAS(error_of("special_tokens:\n  sep_token: \"<sep>\"\n", kU), "special_tokens.sep_token: only bos_token");
  EXPECT_HAS(error_of("group_by_length: true\n", kU), "reorders the data");
  EXPECT_HAS(error_of("save_strategy: best\n", kU), "only steps, epoch and no");
  EXPECT_HAS(error_of("bf16: true\ndtype: float32\n"), "key 'dtype' is set twice");
  EXPECT_HAS(error_of("wandb_projekt: x\n"), "unknown key 'wandb_projekt'");
  EXPECT_HAS(error_of("fp16: maybe\n"), "key 'fp16': expected true or false");
}

// The rest of axolotl's schema (cli/axolotl_keys.inc): left at a default it is accepted and
// listed; set, it is refused as an axolotl setting, not reported as an unknown key.
TEST(ConfigYaml, OtherAxolotlKeysAtTheirDefaultsAreAccepted) {
  auto c = parse("dataset_exact_deduplication: false\nlora_on_cpu:\neager_attention: false\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_HAS(c->notes[0], "axolotl keys left at their defaults: dataset_exact_deduplication, lora_on_cpu, eager_attention");
  const StatusCode kU = StatusCode::kUnimplemented;
  EXPECT_HAS(error_of("dataset_exact_deduplication: true\n", kU),
             "key 'dataset_exact_deduplication' = 'true': this axolotl setting is not built here");
  EXPECT_HAS(error_of("dataset_exact_deduplication: [1]\n", kU), "key 'dataset_exact_deduplication': this axolotl setting");
  // Not axolotl's: still an unknown key.
  EXPECT_HAS(error_of("dataset_exact_dedup: false\n"), "unknown key 'dataset_exact_dedup'");
}

TEST(ConfigYaml, DoraUnderItsNames) {
  for (const char* text : {"use_dora: true\n", "peft_use_dora: yes\n", "lora_use_dora: true\n"}) {
    auto c = parse(text);
    ASSERT_TRUE(c.ok()) << text << c.status().to_string();
    EXPECT_TRUE(c->use_dora) << text;
  }
  auto c = parse("use_dora: false\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->use_dora);
  EXPECT_HAS(error_of("use_dora: maybe\n"), "key 'use_dora'");
}

TEST(ConfigYaml, RsLoraUnderItsNames) {
  auto a = parse("use_rslora: true\n");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(a->use_rslora);
  auto b = parse("peft_use_rslora: true\n");  // axolotl's name
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_TRUE(b->use_rslora);
  EXPECT_FALSE(parse("lora_r: 8\n")->use_rslora);
  EXPECT_HAS(error_of("use_rslora: true\npeft_use_rslora: true\n"), "is set twice");
  EXPECT_HAS(error_of("use_rslora: maybe\n"), "key 'use_rslora'");
  TrainConfig c;
  ASSERT_TRUE(apply_train_override(c, "--peft-use-rslora").ok());
  EXPECT_TRUE(c.use_rslora);
}

// LoRA+ (train/optimizer.h Note [LoRA+]) under axolotl's keys: a ratio > 0 turns it on, a null
// or 0 leaves it off, loraplus_lr_embedding is noted as having no effect (no embedding adapters).
TEST(ConfigYaml, LoraPlus) {
  auto a = parse("loraplus_lr_ratio: 16\nloraplus_lr_embedding: 1.0e-6\n");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_DOUBLE_EQ(a->loraplus_lr_ratio, 16.0);
  ASSERT_EQ(a->notes.size(), 1u);
  EXPECT_HAS(a->notes[0], "loraplus_lr_embedding");
  for (const char* off : {"loraplus_lr_ratio:\nloraplus_lr_embedding:\n", "loraplus_lr_ratio: 0\n", "lora_r: 8\n"}) {
    auto b = parse(off);
    ASSERT_TRUE(b.ok()) << off << b.status().to_string();
    EXPECT_EQ(b->loraplus_lr_ratio, 0.0) << off;
  }
  EXPECT_HAS(error_of("loraplus_lr_ratio: -2\n"), "key 'loraplus_lr_ratio'");
  EXPECT_HAS(error_of("loraplus_lr_ratio: sixteen\n"), "key 'loraplus_lr_ratio': expected a number");
  TrainConfig c;
  ASSERT_TRUE(apply_train_override(c, "--loraplus_lr_ratio=8").ok());
  EXPECT_DOUBLE_EQ(c.loraplus_lr_ratio, 8.0);
}

// axolotl's peft_layers_to_transform (PEFT's layers_to_transform): a list, one index, a comma form.
// NEFTune under transformers' / axolotl's key: a number >= 0 (0 and null: off).
TEST(ConfigYaml, Neftune) {
  auto a = parse("neftune_noise_alpha: 5\n");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_DOUBLE_EQ(a->neftune_noise_alpha, 5.0);
  auto b = parse("neftune_noise_alpha:\n");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->neftune_noise_alpha, 0.0);
  EXPECT_HAS(error_of("neftune_noise_alpha: -1\n"), "key 'neftune_noise_alpha'");
}

// Preference keys (train/preference_loss.h): dpo_loss_type as TRL takes it (a name, a list of one,
// null = sigmoid); orpo_alpha is ORPO's beta where rl_beta is not written (axolotl's order).
TEST(ConfigYaml, PreferenceKeys) {
  for (const char* y : {"dpo_loss_type: ipo\n", "dpo_loss_type: [ipo]\n", "dpo_loss_type:\n  - ipo\n"}) {
    auto a = parse(y);
    ASSERT_TRUE(a.ok()) << y << a.status().to_string();
    EXPECT_EQ(a->dpo_loss_type, "ipo") << y;
  }
  auto n = parse("dpo_loss_type:\n");
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n->dpo_loss_type, "sigmoid");
  EXPECT_HAS(error_of("dpo_loss_type: [ipo, sigmoid]\n"), "a list of one");
  EXPECT_HAS(error_of("dpo_loss_type: aot\n"), "'aot' is not one of: sigmoid, ipo, hinge");
  auto o = parse("rl: orpo\norpo_alpha: 0.3\n");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_DOUBLE_EQ(o->rl_beta, 0.3);
  auto both = parse("rl_beta: 0.2\nrl: orpo\norpo_alpha: 0.3\n");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_DOUBLE_EQ(both->rl_beta, 0.2);
  auto d = parse("rl: dpo\ndpo_norm_loss: true\n");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->dpo_loss_type, "sigmoid_norm");
  EXPECT_HAS(error_of("rl: grpo\n"), "(GRPO is not supported)");
  auto k = parse("rl: KTO\nkto_desirable_weight: 1.2\nkto_undesirable_weight: 0.8\n");  // axolotl's names
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(k->rl, "kto");
  EXPECT_DOUBLE_EQ(k->kto_desirable_weight, 1.2);
  EXPECT_DOUBLE_EQ(k->kto_undesirable_weight, 0.8);
  EXPECT_HAS(error_of("kto_undesirable_weight: -1\n"), "key 'kto_undesirable_weight'");
}

TEST(ConfigYaml, LayersToTransform) {
  auto a = parse("peft_layers_to_transform: [0, 2, 5]\n");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->peft_layers_to_transform, (std::vector<int64_t>{0, 2, 5}));
  auto b = parse("layers_to_transform: 3\n");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->peft_layers_to_transform, std::vector<int64_t>{3});
  auto c = parse("peft_layers_to_transform:\n");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->peft_layers_to_transform.empty());
  EXPECT_HAS(error_of("peft_layers_to_transform: [1, x]\n"), "key 'peft_layers_to_transform': expected layer indices");
  EXPECT_HAS(error_of("peft_layers_to_transform: [1, 1]\n"), "layer 1 is listed twice");
  EXPECT_HAS(error_of("peft_layers_to_transform: [-1]\n"), "expected layer indices >= 0");
  TrainConfig o;
  ASSERT_TRUE(apply_train_override(o, "--peft_layers_to_transform=4,6").ok());
  EXPECT_EQ(o.peft_layers_to_transform, (std::vector<int64_t>{4, 6}));
}

TEST(ConfigYaml, Overrides) {
  TrainConfig c;
  ASSERT_TRUE(apply_train_override(c, "--learning_rate=1e-3").ok());
  ASSERT_TRUE(apply_train_override(c, "--lora-r=32").ok());
  ASSERT_TRUE(apply_train_override(c, "--lora_target_modules=q_proj,o_proj").ok());
  ASSERT_TRUE(apply_train_override(c, "--sample_packing").ok());
  ASSERT_TRUE(apply_train_override(c, "--shuffle=false").ok());
  ASSERT_TRUE(apply_train_override(c, "--output_dir=rel/out").ok());
  EXPECT_DOUBLE_EQ(c.learning_rate, 1e-3);
  EXPECT_EQ(c.lora_r, 32);
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "o_proj"}));
  EXPECT_TRUE(c.sample_packing);
  EXPECT_FALSE(c.shuffle);
  EXPECT_EQ(c.output_dir, "rel/out");  // command-line paths stay relative to the cwd
  EXPECT_HAS(override_error("--datasets=a.jsonl"), "key 'datasets': is a list; set it in the YAML file");
  EXPECT_HAS(override_error("--lerning-rate=1"), "unknown key 'lerning_rate' (did you mean 'learning_rate'?)");
  EXPECT_HAS(override_error("--sequence_len"), "key 'sequence_len' needs a value");
  EXPECT_HAS(override_error("--dtype=float8"), "--dtype=float8: key 'dtype': 'float8' is not one of");
  EXPECT_HAS(override_error("lora_r=3"), "unexpected argument 'lora_r=3'");
}

TEST(ConfigYaml, YamlRoundTrip) {
  auto r = parse("base_model: /m\ndatasets:\n  - path: /d.jsonl\n    type: text\nlearning_rate: 0.00031\n"
                 "lora_dropout: 0.1\nvram_budget: 3GB\nresume_from_checkpoint: 'true'\nchat_template: ''\n");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string y = train_config_to_yaml(*r);
  auto back = parse(y, "");  // base "" : the default output_dir "out" stays relative
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << y;
  EXPECT_EQ(train_config_to_yaml(*back), y);
  EXPECT_DOUBLE_EQ(back->learning_rate, 0.00031);
  EXPECT_EQ(back->resume_from_checkpoint, "true");
  EXPECT_EQ(back->datasets[0].type, "text");
  // Every key appears once.
  for (const std::string& k : train_config_keys()) EXPECT_HAS("\n" + y, "\n" + k + ":");
}

TEST(ConfigYaml, ByteSizes) {
  EXPECT_EQ(*parse_byte_size("4GiB"), 4ull << 30);
  EXPECT_EQ(*parse_byte_size("512MB"), 512000000ull);
  EXPECT_EQ(*parse_byte_size("1.5 gb"), 1500000000ull);
  EXPECT_EQ(*parse_byte_size("123"), 123ull);
  EXPECT_FALSE(parse_byte_size("4 parsecs").ok());
  EXPECT_FALSE(parse_byte_size("").ok());
  EXPECT_FALSE(parse_byte_size("GB").ok());
}

TEST(ConfigYaml, LoadFileResolvesPathsAndChecksRequiredKeys) {
  char tmpl[] = "/tmp/st_cfg_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/train.yaml";
  ASSERT_TRUE(write_file_atomic(path, "base_model: ../model\ndatasets:\n  - path: d.jsonl\n").ok());
  auto r = load_train_config(path, {"--max_steps=7"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->base_model, path_dirname(dir) + "/model");
  EXPECT_EQ(r->datasets[0].path, dir + "/d.jsonl");
  EXPECT_EQ(r->max_steps, 7);

  ASSERT_TRUE(write_file_atomic(path, "datasets:\n  - path: d.jsonl\n").ok());
  r = load_train_config(path, {});
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "missing required key 'base_model'");
  r = load_train_config(dir + "/nope.yaml", {});
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "nope.yaml");
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

// chat_template_kwargs: YAML's types kept (a quoted "false" stays text), round trip through the
// emitted YAML.
TEST(ConfigYaml, ChatTemplateKwargs) {
  auto c = parse("chat_template_kwargs: {enable_thinking: false, effort: high, n: 3, r: 0.5, q: \"false\", z:}\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->chat_template_kwargs, R"({"effort":"high","enable_thinking":false,"n":3,"q":"false","r":0.5,"z":null})");
  const std::string y = train_config_to_yaml(*c);
  EXPECT_HAS(y, "chat_template_kwargs: {");
  auto back = parse(y);
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << y;
  EXPECT_EQ(back->chat_template_kwargs, c->chat_template_kwargs);
  EXPECT_HAS(error_of("chat_template_kwargs: [a]\n"), "key 'chat_template_kwargs': expected a mapping");
  EXPECT_HAS(error_of("chat_template_kwargs: {a: [1]}\n"), "chat_template_kwargs.a: expected a single value");
  EXPECT_TRUE(parse("chat_template_kwargs:\n").ok());
}

}  // namespace
}  // namespace st
