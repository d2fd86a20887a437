// A SentencePiece model file (tokenizer.model: a serialized sentencepiece ModelProto), read as
// hostile input: the pieces with their scores and types, and the few trainer / normalizer fields
// that decide how the vocabulary encodes. data/tokenizer.h builds a tokenizer from it where a model
// directory has tokenizer.model and no tokenizer.json (Tokenizer::from_dir).
//
// Note [protobuf wire]: a protobuf message is a sequence of fields, each a varint key
// (field number << 3 | wire type) and a value: varint (0), 8 bytes (1), length-prefixed bytes (2:
// strings, nested messages, packed arrays) or 4 bytes (5); groups (3, 4) are obsolete and refused.
// Unknown fields are skipped by wire type, as protobuf does. Every length is checked against the
// bytes left before it is used, varints are at most 10 bytes, and nested messages are read only
// to the depth of ModelProto's own (2), so no input can make the reader allocate from a count it
// has not seen the bytes of, or recurse. Errors name the file, the field path and the byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace st {

struct SpmPiece {
  // sentencepiece's ModelProto.SentencePiece.Type, numbered as GGUF's tokenizer.ggml.token_type.
  enum Type : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  std::string piece;
  float score = 0.0f;
  int32_t type = kNormal;
};

struct SpmModel {
  enum ModelType : int32_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };
  std::vector<SpmPiece> pieces;  // index = id
  // TrainerSpec (sentencepiece's defaults where a field is absent)
  int32_t model_type = kUnigram;
  bool byte_fallback = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // -1: none
  bool treat_whitespace_as_suffix = false;
  // NormalizerSpec
  std::string normalizer_name;
  uint64_t precompiled_charsmap_bytes = 0;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses a serialized ModelProto; `what` names the source in errors. Checks what an encoder relies
// on: at least one piece, every piece a non-empty string listed once, finite scores, types 1-6,
// and unk/bos/eos/pad ids inside the vocabulary or -1 (UTF-8 validity: the tokenizer's builder).
StatusOr<SpmModel> parse_spm_model(const std::string& bytes, const std::string& what);
StatusOr<SpmModel> read_spm_model(const std::string& path);

const char* spm_model_type_name(int32_t t);  // "unigram", "bpe", "word", "char", "unknown"

}  // namespace st
