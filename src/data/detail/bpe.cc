// BPE merging: the initial symbols of a piece (bytes, or chars with byte fallback / unk) and the
// merge loop shared by both model kinds.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "data/detail/tokenizer_impl.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

// Converts a byte-level token string to the bytes it stands for. Returns false when a char is
// outside the byte map (such tokens still decode: the char contributes its own UTF-8).
bool byte_level_to_bytes(const std::string& s, std::string* bytes) {
  bool all = true;
  bytes->clear();
  for (uint32_t cp : utf8_decode(s)) {
    int b = unicode_to_byte(cp);
    if (b >= 0) {
      bytes->push_back(static_cast<char>(b));
    } else {
      all = false;
      utf8_append(cp, bytes);
    }
  }
  return all;
}

void grow(TokenizerImpl* t, int32_t id) {
  if (static_cast<size_t>(id) >= t->id_to_str.size()) {
    t->id_to_str.resize(id + 1);
    t->id_to_bytes.resize(id + 1);
    t->id_special.resize(id + 1, 0);
  }
}

constexpr int32_t kMaxId = 1 << 26;

}  // namespace

Status TokenizerImpl::add_vocab(const std::string& s, int32_t id, const std::string& what, bool last_wins) {
  if (id < 0 || id >= kMaxId) return Corruption(Str() << what << ": vocab id " << id << " out of range for '" << s << "'");
  grow(this, id);
  if (!id_to_str[id].empty()) return Corruption(Str() << what << ": vocab id " << id << " used twice");
  id_to_str[id] = s;
  str_to_id[s] = id;
  if (model == ModelKind::kChars) {
    bytes_to_id.emplace(s, id);
    id_to_bytes[id] = s;
    return Status::OK();
  }
  std::string bytes;
  if (byte_level_to_bytes(s, &bytes)) {
    if (last_wins) bytes_to_id.insert_or_assign(bytes, id);
    else bytes_to_id.emplace(bytes, id);
  }
  id_to_bytes[id] = std::move(bytes);
  return Status::OK();
}

Status TokenizerImpl::add_added(const AddedToken& t, const std::string& what) {
  if (t.id < 0 || t.id >= kMaxId || t.content.empty())
    return Corruption(Str() << what << ": bad added token id " << t.id << " '" << t.content << "'");
  grow(this, t.id);
  if (!id_to_str[t.id].empty() && id_to_str[t.id] != t.content)
    return Corruption(Str() << what << ": added token '" << t.content << "' has id " << t.id << " of vocab entry '"
                            << id_to_str[t.id] << "'");
  id_to_str[t.id] = t.content;
  str_to_id[t.content] = t.id;
  id_to_bytes[t.id] = t.content;  // HF decodes added tokens verbatim, outside the ByteLevel decoder
  id_special[t.id] = t.special;
  id_added.resize(id_to_str.size(), 0);
  id_added[t.id] = 1;
  added.push_back(t);
  return Status::OK();
}

Status TokenizerImpl::add_merge(const std::string& a, const std::string& b, int32_t rank, const std::string& what) {
  auto ia = str_to_id.find(a), ib = str_to_id.find(b), ic = str_to_id.find(a + b);
  if (ia == str_to_id.end() || ib == str_to_id.end() || ic == str_to_id.end())
    return Corruption(Str() << what << ": merge " << rank << " '" << a << " " << b << "' uses a token not in the vocab");
  uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
  merges.emplace(key, std::make_pair(rank, ic->second));  // keep the first (lowest) rank
  return Status::OK();
}

Status TokenizerImpl::finish(const std::string& what) {
  byte_id.fill(-1);
  fallback_id.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (model == ModelKind::kChars) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);  // HF looks up exactly this spelling
      auto it = bytes_to_id.find(name);
      if (it != bytes_to_id.end()) fallback_id[b] = it->second;
      continue;
    }
    auto it = bytes_to_id.find(std::string(1, static_cast<char>(b)));
    if (it != bytes_to_id.end()) byte_id[b] = it->second;
  }
  id_added.resize(id_to_str.size(), 0);
  track_lead = false;
  for (const PreStep& st : steps)
    if (st.kind == PreStep::Kind::kMetaspace && st.prepend == PrependScheme::kFirst) track_lead = true;
  added_first.fill(0);
  for (AddedToken& t : added) {
    if (t.normalized) t.content = normalize(t.content);  // HF matches them on normalized text
    if (t.content.empty()) return Corruption(Str() << what << ": added token " << t.id << " normalizes to ''");
    if (t.normalized) {
      // HF's id_to_token (and so decode) gives the normalized content, e.g. "▁[INST]" after Prepend,
      // for either model kind (config_fuzz: " world" decoded "x world" under Prepend("x")).
      id_to_str[t.id] = t.content;
      str_to_id.emplace(t.content, t.id);
    }
    added_first[static_cast<uint8_t>(t.content[0])] = 1;
  }
  // Longest first so that the first hit at a position is the leftmost-longest match.
  std::stable_sort(added.begin(), added.end(),
                   [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  if (id_to_str.empty()) return Corruption(Str() << what << ": empty vocabulary");
  return Status::OK();
}

namespace {

struct Sym {
  int32_t id, prev, next;
};

// Applies merges to `syms` (a linked list in index order) until none applies: the lowest rank
// first, the leftmost on equal rank (HF word.rs merge_all; SentencePiece's agenda when ranks
// come from scores, see tokenizer_gguf.cc). Appends the final ids to `out`.
void merge_and_emit(const TokenizerImpl& t, std::vector<Sym>& syms, std::vector<int32_t>* out) {
  if (syms.empty()) return;
  for (size_t i = 0; i < syms.size(); ++i) {
    syms[i].prev = static_cast<int32_t>(i) - 1;
    syms[i].next = static_cast<int32_t>(i) + 1;
  }
  syms.back().next = -1;
  struct Cand { int32_t rank, pos; bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; } };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto lookup = [&](int32_t l) -> const std::pair<int32_t, int32_t>* {
    int32_t r = syms[l].next;
    if (r < 0) return nullptr;
    auto it = t.merges.find((static_cast<uint64_t>(syms[l].id) << 32) | static_cast<uint32_t>(syms[r].id));
    return it == t.merges.end() ? nullptr : &it->second;
  };
  auto push = [&](int32_t l) { if (auto m = lookup(l)) heap.push({m->first, l}); };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    if (syms[c.pos].id < 0) continue;  // merged away
    auto m = lookup(c.pos);
    if (!m || m->first != c.rank) continue;  // stale entry
    int32_t r = syms[c.pos].next;
    syms[c.pos].id = m->second;
    syms[c.pos].next = syms[r].next;
    if (syms[r].next >= 0) syms[syms[r].next].prev = c.pos;
    syms[r].id = -1;
    if (syms[c.pos].prev >= 0) push(syms[c.pos].prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

}  // namespace

void TokenizerImpl::bpe(std::string_view piece, std::vector<int32_t>* out) const {
  if (model == ModelKind::kChars) bpe_chars(piece, out);
  else bpe_bytes(piece, out);
}

void TokenizerImpl::bpe_bytes(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges) {
    auto it = bytes_to_id.find(std::string(piece));
    if (it != bytes_to_id.end()) { out->push_back(it->second); return; }
  }
  std::vector<Sym> syms;
  syms.reserve(piece.size());
  for (unsigned char c : piece) {
    if (byte_id[c] < 0) continue;  // HF drops chars missing from the vocab when there is no unk token
    syms.push_back({byte_id[c], 0, 0});
  }
  merge_and_emit(*this, syms, out);
}

// Note [unk order]: HF's merge_word keeps an unknown char pending (to fuse it with the next
// unknown ones) and emits it only before the next char found in the vocab, or at the end; chars
// that fall back to bytes are emitted at once. So with a partial byte table, "XY" (X: unk,
// Y: bytes) gives [bytes(Y), unk]. Reproduced as is.
void TokenizerImpl::bpe_chars(std::string_view piece, std::vector<int32_t>* out) const {
  std::string key(piece);
  if (ignore_merges) {
    auto it = bytes_to_id.find(key);
    if (it != bytes_to_id.end()) { out->push_back(it->second); return; }
  }
  std::vector<size_t> offs;
  utf8_decode(piece, &offs);  // invalid bytes are 1-byte "chars": never in the vocab, so bytes
  std::vector<Sym> syms;
  syms.reserve(offs.size());
  bool unk_pending = false;
  for (size_t k = 0; k + 1 < offs.size(); ++k) {
    key.assign(piece.substr(offs[k], offs[k + 1] - offs[k]));
    auto it = bytes_to_id.find(key);
    if (it != bytes_to_id.end()) {
      if (unk_pending) syms.push_back({unk_id, 0, 0});
      unk_pending = false;
      syms.push_back({it->second, 0, 0});
      continue;
    }
    if (byte_fallback && std::all_of(key.begin(), key.end(), [&](char b) { return fallback_id[static_cast<uint8_t>(b)] >= 0; })) {
      for (char b : key) syms.push_back({fallback_id[static_cast<uint8_t>(b)], 0, 0});
      continue;
    }
    if (unk_id < 0) continue;  // dropped
    if (unk_pending && !fuse_unk) syms.push_back({unk_id, 0, 0});
    unk_pending = true;
  }
  if (unk_pending) syms.push_back({unk_id, 0, 0});
  merge_and_emit(*this, syms, out);
}

}  // namespace st::tok
