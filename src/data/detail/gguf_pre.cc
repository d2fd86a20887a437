// GGUF `tokenizer.ggml.pre` names -> the pre-tokenizer of the HF tokenizer.json the GGUF was
// converted from (Note [GGUF pre-tokenizers]).
//
// Note [GGUF pre-tokenizers]
// A GGUF byte-level vocabulary names its pre-tokenizer by a word llama.cpp's converter picked by
// hashing the HF tokenizer's output on a probe text. We rebuild, for each name, the pipeline the HF
// tokenizer.json holds (its Split regexes as written there, (?i:...) and all; Digits; ByteLevel)
// and run it through the same code as tokenizer.json files, so a GGUF tokenizes as the HF model it
// came from. Where no tokenizer.json was available to us the list follows llama.cpp's regexes
// (llama-vocab.cpp), which its converter checks against HF ids. The names are grouped as llama.cpp
// groups them; tests/data/gguf_vocab_test.cc checks the real vocabularies llama.cpp ships against
// HF's ids.
#include "data/detail/tokenizer_json.h"

namespace st::tok {
namespace {

Json split(const std::string& re) {
  return {{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}};
}
Json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}
Json digits(bool individual) { return {{"type", "Digits"}, {"individual_digits", individual}}; }
Json seq(std::vector<Json> steps) { return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}; }

struct Recipe {
  std::vector<const char*> names;
  Json pre;
  bool nfc = false;
  bool ignore_merges = false;
};

const char* const kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSeedCoderPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekCjk = R"([一-龥ࠀ-一가-퟿]+)";
const char* const kDeepseekLetters =
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)";
const char* const kDeepseekV3Pattern =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kBloomPattern = R"( ?[^(\s|[.,!?…。，、।۔،])]+)";

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> all = [] {
    std::vector<Recipe> r;
    r.push_back({{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
                 seq({split(kLlama3Pattern), byte_level(false)}), false, true});
    r.push_back({{"dbrx", "smaug-bpe"}, seq({split(kLlama3Pattern), byte_level(false)})});
    r.push_back({{"qwen2", "deepseek-r1-qwen", "f2llmv2", "kormo"}, seq({split(kQwen2Pattern), byte_level(false)}), true});
    r.push_back({{"megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"}, seq({split(kQwen2Pattern), byte_level(false)})});
    r.push_back({{"qwen35"}, seq({split(kQwen35Pattern), byte_level(false)})});  // no NFC: llama.cpp's HF ids keep e + U+0301
    r.push_back({{"tekken"}, seq({split(kTekkenPattern), byte_level(false)})});
    r.push_back({{"gpt-2", "gpt2", "default", "", "mpt", "olmo", "phi-2", "jais", "trillion", "exaone4", "a.x-4.0",
                  "gigachat", "mellum", "granite-docling", "roberta-bpe", "modern-bert"},
                 byte_level(true)});
    r.push_back({{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
                 seq({digits(true), byte_level(true)})});
    r.push_back({{"deepseek-llm"},
                 seq({split(R"([\r\n])"), split(kDeepseekLetters), split(R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)"),
                      split(R"(\s+$)"), split(kDeepseekCjk), digits(true), byte_level(false)})});
    r.push_back({{"deepseek-coder"}, seq({split(R"([\r\n])"), split(R"(\s?\p{L}+)"), split(R"(\s?\p{P}+)"),
                                          split(kDeepseekCjk), digits(true), byte_level(false)})});
    r.push_back({{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
                 seq({split(R"(\p{N}{1,3})"), split(R"([一-龥぀-ゟ゠-ヿ]+)"), split(kDeepseekV3Pattern), byte_level(false)})});
    r.push_back({{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, seq({split(kO200kPattern), byte_level(false)})});
    r.push_back({{"seed-coder"}, seq({split(kSeedCoderPattern), byte_level(false)})});
    // Falcon's Digits and 3-digit Split run after ByteLevel, on the byte-mapped text.
    r.push_back({{"falcon"}, seq({{{"type", "Punctuation"}, {"behavior", "Contiguous"}}, byte_level(true), digits(false),
                                  split("[0-9][0-9][0-9]")})});
    r.push_back({{"bloom", "poro-chat", "gpt3-finnish"}, seq({split(kBloomPattern), byte_level(false)})});
    r.push_back({{"viking"}, seq({split(kBloomPattern), digits(true), byte_level(false)})});
    return r;
  }();
  return all;
}

}  // namespace

std::vector<std::string> gguf_pre_names() {
  std::vector<std::string> v;
  for (const Recipe& r : recipes()) v.insert(v.end(), r.names.begin(), r.names.end());
  return v;
}

StatusOr<GgufPreRecipe> gguf_pre_recipe(const std::string& name, const std::string& what) {
  for (const Recipe& r : recipes())
    for (const char* n : r.names)
      if (name == n) return GgufPreRecipe{r.pre, r.nfc, r.ignore_merges};
  return Unimplemented(Str() << what << ": tokenizer.ggml.pre '" << name
                             << "' (not one of the names whose HF pre-tokenizer is known here)");
}

Status gguf_pre_tokenizer(const std::string& name, TokenizerImpl* t, const std::string& what) {
  ASSIGN_OR_RETURN(GgufPreRecipe r, gguf_pre_recipe(name, what));
  if (r.nfc) t->norm.push_back(norm_step(NormStep::Kind::kNfc));
  t->ignore_merges = r.ignore_merges;
  return parse_pre_tokenizer(r.pre, t, what + " (tokenizer.ggml.pre '" + name + "')");
}

}  // namespace st::tok
