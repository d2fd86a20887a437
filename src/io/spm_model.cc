#include "io/spm_model.h"

#include <cmath>
#include <cstring>
#include <unordered_set>

#include "core/file.h"

namespace st {
namespace {

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// One message's bytes (Note [protobuf wire]). Errors are sticky: after the first, next() returns
// false and every read a zero value; the caller checks failed() once.
class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n, size_t base, std::string path, std::string* err)
      : p_(p), n_(n), base_(base), path_(std::move(path)), err_(err) {}

  // The next field's number and wire type; false at the end of the message or after an error.
  bool next(uint32_t* field, uint32_t* wire) {
    if (!err_->empty() || i_ >= n_) return false;
    const size_t at = i_;
    const uint64_t key = varint();
    if (!err_->empty()) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    if (*field == 0 || key >> 32 != 0) return fail(at, "a field number of 0 or past 2^29");
    if (*wire != kVarint && *wire != kFixed64 && *wire != kBytes && *wire != kFixed32)
      return fail(at, Str() << "field " << *field << " has wire type " << *wire << " (groups and types 6-7 are not protobuf 3)");
    field_ = *field;
    return true;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int k = 0; k < 10; ++k) {
      if (i_ >= n_) return fail(i_, "a varint runs past the end"), 0;
      const uint8_t b = p_[i_++];
      v |= static_cast<uint64_t>(b & 0x7F) << (7 * k);
      if ((b & 0x80) == 0) return v;
    }
    return fail(i_, "a varint longer than 10 bytes"), 0;
  }
  // The value of a field of the wire type `want`, named `name` in errors.
  bool expect(uint32_t wire, uint32_t want, const char* name) {
    if (wire == want) return true;
    return fail(i_, Str() << name << " has wire type " << wire << ", expected " << want);
  }
  std::string_view bytes(size_t* at) {
    const uint64_t len = varint();
    *at = base_ + i_;
    if (!err_->empty()) return {};
    if (len > n_ - i_) return fail(i_, Str() << "a length of " << len << " runs past the end (" << (n_ - i_) << " bytes left)"), std::string_view();
    std::string_view v(reinterpret_cast<const char*>(p_ + i_), static_cast<size_t>(len));
    i_ += static_cast<size_t>(len);
    return v;
  }
  float fixed32_float() {
    if (n_ - i_ < 4) return fail(i_, "a 4-byte value runs past the end"), 0.0f;
    uint32_t u = static_cast<uint32_t>(p_[i_]) | static_cast<uint32_t>(p_[i_ + 1]) << 8 |
                 static_cast<uint32_t>(p_[i_ + 2]) << 16 | static_cast<uint32_t>(p_[i_ + 3]) << 24;
    i_ += 4;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // int32 fields are varints; a negative one is sign-extended to 64 bits (10 bytes).
  int32_t int32() {
    const uint64_t v = varint();
    const int64_t s = static_cast<int64_t>(v);
    if (s < INT32_MIN || s > INT32_MAX) return fail(i_, Str() << "field " << field_ << " holds " << s << ", not an int32"), 0;
    return static_cast<int32_t>(s);
  }
  bool boolean() { return varint() != 0; }
  void skip(uint32_t wire) {
    size_t at;
    switch (wire) {
      case kVarint: varint(); break;
      case kBytes: bytes(&at); break;
      case kFixed32:
      case kFixed64: {
        const size_t w = wire == kFixed32 ? 4 : 8;
        if (n_ - i_ < w) fail(i_, "a fixed-size value runs past the end");
        else i_ += w;
        break;
      }
      default: fail(i_, "an unknown wire type");
    }
  }
  bool fail(size_t at, const std::string& msg) {
    if (err_->empty()) *err_ = Str() << path_ << ": " << msg << " (byte " << (base_ + at) << ")";
    return false;
  }
  size_t offset() const { return base_ + i_; }

 private:
  const uint8_t* p_;
  size_t n_, i_ = 0, base_;
  std::string path_;
  std::string* err_;
  uint32_t field_ = 0;
};

WireReader sub(std::string_view v, size_t at, const std::string& path, std::string* err) {
  return WireReader(reinterpret_cast<const uint8_t*>(v.data()), v.size(), at, path, err);
}

void read_piece(std::string_view v, size_t at, const std::string& path, std::string* err, SpmPiece* p) {
  WireReader r = sub(v, at, path, err);
  uint32_t f, w;
  size_t sat;
  while (r.next(&f, &w)) {
    if (f == 1 && r.expect(w, kBytes, "piece")) p->piece = std::string(r.bytes(&sat));
    else if (f == 2 && r.expect(w, kFixed32, "score")) p->score = r.fixed32_float();
    else if (f == 3 && r.expect(w, kVarint, "type")) p->type = r.int32();
    else r.skip(w);
  }
}

void read_trainer(std::string_view v, size_t at, const std::string& path, std::string* err, SpmModel* m) {
  WireReader r = sub(v, at, path, err);
  uint32_t f, w;
  while (r.next(&f, &w)) {
    if (w != kVarint) { r.skip(w); continue; }
    switch (f) {
      case 3: m->model_type = r.int32(); break;
      case 24: m->treat_whitespace_as_suffix = r.boolean(); break;
      case 35: m->byte_fallback = r.boolean(); break;
      case 40: m->unk_id = r.int32(); break;
      case 41: m->bos_id = r.int32(); break;
      case 42: m->eos_id = r.int32(); break;
      case 43: m->pad_id = r.int32(); break;
      default: r.skip(w);
    }
  }
}

void read_normalizer(std::string_view v, size_t at, const std::string& path, std::string* err, SpmModel* m) {
  WireReader r = sub(v, at, path, err);
  uint32_t f, w;
  size_t sat;
  while (r.next(&f, &w)) {
    if (f == 1 && r.expect(w, kBytes, "normalizer_spec.name")) m->normalizer_name = std::string(r.bytes(&sat));
    else if (f == 2 && r.expect(w, kBytes, "normalizer_spec.precompiled_charsmap")) m->precompiled_charsmap_bytes = r.bytes(&sat).size();
    else if (f == 3 && r.expect(w, kVarint, "normalizer_spec.add_dummy_prefix")) m->add_dummy_prefix = r.boolean();
    else if (f == 4 && r.expect(w, kVarint, "normalizer_spec.remove_extra_whitespaces")) m->remove_extra_whitespaces = r.boolean();
    else if (f == 5 && r.expect(w, kVarint, "normalizer_spec.escape_whitespaces")) m->escape_whitespaces = r.boolean();
    else r.skip(w);
  }
}

}  // namespace

const char* spm_model_type_name(int32_t t) {
  switch (t) {
    case SpmModel::kUnigram: return "unigram";
    case SpmModel::kBpe: return "bpe";
    case SpmModel::kWord: return "word";
    case SpmModel::kChar: return "char";
  }
  return "unknown";
}

StatusOr<SpmModel> parse_spm_model(const std::string& bytes, const std::string& what) {
  SpmModel m;
  std::string err;
  WireReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, what, &err);
  uint32_t f, w;
  bool trainer = false;
  while (r.next(&f, &w)) {
    if (f < 1 || f > 3) { r.skip(w); continue; }
    const char* name = f == 1 ? "pieces" : f == 2 ? "trainer_spec" : "normalizer_spec";
    if (!r.expect(w, kBytes, name)) break;
    size_t at;
    const std::string_view v = r.bytes(&at);
    if (!err.empty()) break;
    if (f == 1) {
      m.pieces.emplace_back();
      read_piece(v, at, what, &err, &m.pieces.back());
      if (!err.empty()) err += Str() << " in pieces[" << (m.pieces.size() - 1) << "]";
    } else if (f == 2) {
      trainer = true;
      read_trainer(v, at, what, &err, &m);
      if (!err.empty()) err += " in trainer_spec";
    } else {
      read_normalizer(v, at, what, &err, &m);
      if (!err.empty()) err += " in normalizer_spec";
    }
  }
  if (!err.empty()) return Corruption(Str() << err << " -- not a sentencepiece model, or a damaged one");
  if (m.pieces.empty())
    return Corruption(Str() << what << ": no pieces -- not a sentencepiece model (" << bytes.size() << " bytes)");
  if (!trainer) return Corruption(Str() << what << ": no trainer_spec -- not a sentencepiece model");
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const SpmPiece& p = m.pieces[i];
    if (p.piece.empty()) return Corruption(Str() << what << ": pieces[" << i << "] is empty");
    if (!std::isfinite(p.score)) return Corruption(Str() << what << ": pieces[" << i << "] '" << p.piece << "' has score " << p.score);
    if (p.type < SpmPiece::kNormal || p.type > SpmPiece::kByte)
      return Corruption(Str() << what << ": pieces[" << i << "] '" << p.piece << "' has type " << p.type << " (1-6)");
    if (!seen.insert(p.piece).second)
      return Corruption(Str() << what << ": pieces[" << i << "] '" << p.piece << "' is listed twice");
  }
  const int64_t n = static_cast<int64_t>(m.pieces.size());
  for (auto [name, id] : {std::pair<const char*, int32_t>{"unk_id", m.unk_id}, {"bos_id", m.bos_id},
                          {"eos_id", m.eos_id}, {"pad_id", m.pad_id}})
    if (id < -1 || id >= n)
      return Corruption(Str() << what << ": trainer_spec." << name << " " << id << " is outside the vocabulary (" << n << " pieces)");
  return m;
}

StatusOr<SpmModel> read_spm_model(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, read_file_to_string(path));
  return parse_spm_model(bytes, path);
}

}  // namespace st
