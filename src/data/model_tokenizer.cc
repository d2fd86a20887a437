#include "data/model_tokenizer.h"

#include "core/file.h"
#include "data/detail/tokenizer_json.h"
#include "io/gguf_checkpoint.h"

namespace st {

namespace {

GgufTokenizerParts parts_of(GgufTokenizerData d) {
  GgufTokenizerParts p;
  p.model = d.model;
  p.tokens = std::move(d.tokens);
  p.merges = std::move(d.merges);
  p.token_types = std::move(d.token_types);
  p.scores = std::move(d.scores);
  p.pre = d.pre;
  p.bos_id = d.bos_id;
  p.eos_id = d.eos_id;
  p.pad_id = d.pad_id;
  p.add_bos = d.add_bos;
  p.add_space_prefix = d.add_space_prefix;
  p.chat_template = d.chat_template;
  return p;
}

}  // namespace

StatusOr<Tokenizer> gguf_file_tokenizer(const GgufFile& file, int32_t* eot_id) {
  if (eot_id) *eot_id = -1;
  ASSIGN_OR_RETURN(GgufTokenizerData d, read_gguf_tokenizer(file));  // errors name the file
  const int32_t eot = d.eot_id;
  ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::from_gguf_parts(parts_of(std::move(d))), file.path());
  t.set_chat_template(t.chat_template(), file.path() + " tokenizer.chat_template");
  if (eot_id) *eot_id = eot;
  return t;
}

StatusOr<HfTokenizerFiles> gguf_hf_tokenizer_files(const GgufFile& file) {
  ASSIGN_OR_RETURN(GgufTokenizerData d, read_gguf_tokenizer(file));
  const GgufTokenizerParts p = parts_of(std::move(d));
  // The vocabulary must load as ours first: duplicates, bad merges and missing byte pieces are
  // refused there by name, so the files never hold a vocabulary that silently lost an entry.
  RETURN_IF_ERROR(Tokenizer::from_gguf_parts(p).status(), file.path());
  return tok::export_hf_tokenizer(p, file.path());
}

StatusOr<Tokenizer> load_model_tokenizer(const std::string& model_path, int32_t* eot_id) {
  if (eot_id) *eot_id = -1;
  if (is_directory(model_path)) return Tokenizer::from_dir(model_path);
  ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(model_path));
  return gguf_file_tokenizer(f, eot_id);
}

}  // namespace st
