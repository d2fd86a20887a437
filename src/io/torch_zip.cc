#include "io/torch_zip.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

namespace st {
namespace {

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// ---- zip: the central directory of stored entries ---------------------------------------------

struct ZipEntry {
  uint64_t data = 0, size = 0;  // file offset of the bytes, their count
};

StatusOr<std::map<std::string, ZipEntry>> read_zip(const uint8_t* d, size_t n, const std::string& what) {
  auto bad = [&](const std::string& m) { return Corruption(Str() << what << ": " << m); };
  if (n >= 2 && d[0] == 0x80) return Unimplemented(Str() << what << ": a PyTorch checkpoint in the format before torch 1.6 (a bare pickle); load and save it again with torch.save, or convert it to safetensors");
  if (n < 22 || le(d, 4) != 0x04034b50) return bad("not a zip archive (a torch.save checkpoint is one)");
  size_t eocd = n;  // the end-of-central-directory record: within the last 64 KiB + 22 bytes
  for (size_t i = n - 22 + 1; i-- > (n > 65557 ? n - 65557 : 0);)
    if (le(d + i, 4) == 0x06054b50) { eocd = i; break; }
  if (eocd == n) return bad("no zip end-of-central-directory record (truncated?)");
  uint64_t count = le(d + eocd + 10, 2), cd_size = le(d + eocd + 12, 4), cd_off = le(d + eocd + 16, 4);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {  // ZIP64
    if (eocd < 20 || le(d + eocd - 20, 4) != 0x07064b50) return bad("ZIP64 sizes without a ZIP64 locator");
    const uint64_t rec = le(d + eocd - 20 + 8, 8);
    if (rec > n - 56 || le(d + rec, 4) != 0x06064b50) return bad("the ZIP64 end record is not where its locator says");
    count = le(d + rec + 32, 8);
    cd_size = le(d + rec + 40, 8);
    cd_off = le(d + rec + 48, 8);
  }
  if (cd_off > n || cd_size > n - cd_off) return bad("the central directory lies past the end of the file");
  std::map<std::string, ZipEntry> out;
  uint64_t p = cd_off;
  const uint64_t end = cd_off + cd_size;
  for (uint64_t k = 0; k < count; ++k) {
    if (end - p < 46 || le(d + p, 4) != 0x02014b50) return bad(Str() << "central directory entry " << k << " is damaged");
    const uint64_t method = le(d + p + 10, 2), name_len = le(d + p + 28, 2), extra_len = le(d + p + 30, 2),
                   comment_len = le(d + p + 32, 2);
    uint64_t csize = le(d + p + 20, 4), usize = le(d + p + 24, 4), local = le(d + p + 42, 4);
    if (46 + name_len + extra_len + comment_len > end - p) return bad(Str() << "central directory entry " << k << " runs past it");
    const std::string name(reinterpret_cast<const char*>(d + p + 46), name_len);
    for (uint64_t e = p + 46 + name_len; e + 4 <= p + 46 + name_len + extra_len;) {  // ZIP64 extra field
      const uint64_t id = le(d + e, 2), len = le(d + e + 2, 2);
      if (e + 4 + len > p + 46 + name_len + extra_len) break;
      if (id == 1) {
        uint64_t q = e + 4;
        auto take = [&](uint64_t* v) {
          if (*v == 0xFFFFFFFF && q + 8 <= e + 4 + len) *v = le(d + q, 8), q += 8;
        };
        take(&usize);
        take(&csize);
        take(&local);
      }
      e += 4 + len;
    }
    if (method != 0)
      return Unimplemented(Str() << what << ": zip entry '" << name << "' is compressed (method " << method
                                 << "); torch.save stores entries uncompressed -- save it again with torch.save");
    if (csize != usize) return bad(Str() << "zip entry '" << name << "' is stored with two sizes");
    if (local > n || n - local < 30 || le(d + local, 4) != 0x04034b50)
      return bad(Str() << "zip entry '" << name << "' has no local header where the directory says");
    const uint64_t data = local + 30 + le(d + local + 26, 2) + le(d + local + 28, 2);
    if (data > n || usize > n - data) return bad(Str() << "zip entry '" << name << "' runs past the end of the file (truncated?)");
    out[name] = {data, usize};
    p += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// ---- the pickle machine -----------------------------------------------------------------------

struct Value;
using V = std::shared_ptr<Value>;
struct Value {
  enum Kind { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kGlobal, kStorage, kTensor } kind = kNone;
  int64_t i = 0;
  std::string s;                        // str, bytes; a global's "module name"; a storage's key
  std::vector<V> items;                 // tuple, list; a dict's keys and values in turn
  DType dtype = DType::kF32;            // storage
  bool dtype_ok = true;                 // storage: a type we read
  int64_t numel = 0;                    // storage
  V storage;                            // tensor
  int64_t offset = 0;                   // tensor, in elements
  std::vector<int64_t> shape, stride;   // tensor
};

V make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

bool storage_dtype(const std::string& global, DType* dt) {
  static const std::map<std::string, DType> k = {
      {"torch FloatStorage", DType::kF32}, {"torch BFloat16Storage", DType::kBF16}, {"torch HalfStorage", DType::kF16},
      {"torch IntStorage", DType::kI32},   {"torch LongStorage", DType::kI64},      {"torch ByteStorage", DType::kU8}};
  auto it = k.find(global);
  if (it == k.end()) return false;
  *dt = it->second;
  return true;
}
bool storage_type(const std::string& global) {
  return global.rfind("torch ", 0) == 0 && global.size() > 13 && global.compare(global.size() - 7, 7, "Storage") == 0;
}

// A tuple of ints (size, stride) as a vector; false if it is not one.
bool int_tuple(const V& v, std::vector<int64_t>* out) {
  if (!v || v->kind != Value::kTuple) return false;
  out->clear();
  for (const V& e : v->items) {
    if (e->kind != Value::kInt) return false;
    out->push_back(e->i);
  }
  return true;
}

class Unpickler {
 public:
  Unpickler(const uint8_t* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}

  StatusOr<V> run() {
    constexpr size_t kMaxStack = size_t{1} << 22, kMaxMemo = size_t{1} << 22;
    while (true) {
      if (i_ >= n_) return bad("the pickle ends before its STOP");
      const size_t at = i_;
      const uint8_t op = p_[i_++];
      if (stack_.size() > kMaxStack || memo_.size() > kMaxMemo) return bad("the pickle grows past any checkpoint's");
      switch (op) {
        case 0x80: RETURN_IF_ERROR(need(1)); ++i_; break;             // PROTO
        case 0x95: RETURN_IF_ERROR(need(8)); i_ += 8; break;          // FRAME
        case '.': {                                                    // STOP
          if (stack_.size() != 1) return bad("STOP with a stack that does not hold one value");
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;             // MARK
        case '}': stack_.push_back(make(Value::kDict)); break;
        case ']': stack_.push_back(make(Value::kList)); break;
        case ')': stack_.push_back(make(Value::kTuple)); break;
        case 'N': stack_.push_back(make(Value::kNone)); break;
        case 0x88: case 0x89: {                                        // NEWTRUE, NEWFALSE
          V v = make(Value::kBool);
          v->i = op == 0x88;
          stack_.push_back(v);
          break;
        }
        case 'K': case 'M': case 'J': {                                // BININT1, BININT2, BININT
          const int w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
          RETURN_IF_ERROR(need(w));
          V v = make(Value::kInt);
          v->i = op == 'J' ? static_cast<int32_t>(le(p_ + i_, 4)) : static_cast<int64_t>(le(p_ + i_, w));
          i_ += w;
          stack_.push_back(v);
          break;
        }
        case 0x8a: {                                                   // LONG1
          RETURN_IF_ERROR(need(1));
          const int w = p_[i_++];
          if (w > 8) return bad("a LONG1 wider than 8 bytes");
          RETURN_IF_ERROR(need(w));
          uint64_t u = w ? le(p_ + i_, w) : 0;
          if (w > 0 && w < 8 && (p_[i_ + w - 1] & 0x80)) u |= ~uint64_t{0} << (8 * w);  // sign-extend
          i_ += w;
          V v = make(Value::kInt);
          v->i = static_cast<int64_t>(u);
          stack_.push_back(v);
          break;
        }
        case 'G': {                                                    // BINFLOAT (big-endian)
          RETURN_IF_ERROR(need(8));
          i_ += 8;
          stack_.push_back(make(Value::kFloat));
          break;
        }
        case 'X': case 0x8c: case 'B': case 'C': {                     // (SHORT_)BINUNICODE, (SHORT_)BINBYTES
          const int w = op == 'X' || op == 'B' ? 4 : 1;
          RETURN_IF_ERROR(need(w));
          const uint64_t len = le(p_ + i_, w);
          i_ += w;
          RETURN_IF_ERROR(need(len));
          V v = make(Value::kStr);
          v->s.assign(reinterpret_cast<const char*>(p_ + i_), len);
          i_ += len;
          stack_.push_back(v);
          break;
        }
        case 'c': {                                                    // GLOBAL "module\nname\n"
          std::string mod, name;
          RETURN_IF_ERROR(line(&mod));
          RETURN_IF_ERROR(line(&name));
          RETURN_IF_ERROR(global(mod + " " + name));
          break;
        }
        case 0x93: {                                                   // STACK_GLOBAL
          if (stack_.size() < 2 || stack_.end()[-1]->kind != Value::kStr || stack_.end()[-2]->kind != Value::kStr)
            return bad("STACK_GLOBAL without two strings");
          const std::string g = stack_.end()[-2]->s + " " + stack_.end()[-1]->s;
          stack_.resize(stack_.size() - 2);
          RETURN_IF_ERROR(global(g));
          break;
        }
        case 'q': case 'r': case 0x94: {                               // BINPUT, LONG_BINPUT, MEMOIZE
          size_t key = memo_.size();
          if (op != 0x94) {
            const int w = op == 'q' ? 1 : 4;
            RETURN_IF_ERROR(need(w));
            key = le(p_ + i_, w);
            i_ += w;
          }
          if (stack_.empty()) return bad("a memo store with an empty stack");
          memo_[key] = stack_.back();
          break;
        }
        case 'h': case 'j': {                                          // BINGET, LONG_BINGET
          const int w = op == 'h' ? 1 : 4;
          RETURN_IF_ERROR(need(w));
          auto it = memo_.find(le(p_ + i_, w));
          i_ += w;
          if (it == memo_.end()) return bad("a memo fetch of a key never stored");
          stack_.push_back(it->second);
          break;
        }
        case 't': case 0x85: case 0x86: case 0x87: {                   // TUPLE, TUPLE1-3
          size_t k;
          if (op == 't') {
            if (marks_.empty()) return bad("TUPLE without a MARK");
            k = stack_.size() - marks_.back();
            marks_.pop_back();
          } else {
            k = op - 0x84;
          }
          if (k > stack_.size()) return bad("a tuple of more items than the stack holds");
          V v = make(Value::kTuple);
          v->items.assign(stack_.end() - static_cast<ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          stack_.push_back(v);
          break;
        }
        case 'a': case 'e': case 's': case 'u': {                      // APPEND(S), SETITEM(S)
          size_t from;
          if (op == 'e' || op == 'u') {
            if (marks_.empty()) return bad("APPENDS/SETITEMS without a MARK");
            from = marks_.back();
            marks_.pop_back();
          } else {
            const size_t k = op == 'a' ? 1 : 2;
            if (stack_.size() < k + 1) return bad("APPEND/SETITEM on a short stack");
            from = stack_.size() - k;
          }
          if (from == 0 || from > stack_.size()) return bad("APPENDS/SETITEMS with nothing to add to");
          const V& target = stack_[from - 1];
          const bool dict = op == 's' || op == 'u';
          if (target->kind != (dict ? Value::kDict : Value::kList)) return bad(dict ? "SETITEM on a non-dict" : "APPEND on a non-list");
          if (dict && (stack_.size() - from) % 2) return bad("SETITEMS with an odd count");
          target->items.insert(target->items.end(), stack_.begin() + static_cast<ptrdiff_t>(from), stack_.end());
          stack_.resize(from);
          break;
        }
        case 'Q': {                                                    // BINPERSID
          if (stack_.empty()) return bad("BINPERSID on an empty stack");
          V pid = stack_.back();
          stack_.pop_back();
          if (pid->kind != Value::kTuple || pid->items.size() != 5 || pid->items[0]->kind != Value::kStr ||
              pid->items[0]->s != "storage" || pid->items[1]->kind != Value::kGlobal || pid->items[2]->kind != Value::kStr ||
              pid->items[4]->kind != Value::kInt || pid->items[4]->i < 0)
            return bad("a persistent id that is not ('storage', type, key, location, numel)");
          V st = make(Value::kStorage);
          st->dtype_ok = storage_dtype(pid->items[1]->s, &st->dtype);
          st->s = pid->items[2]->s;
          st->numel = pid->items[4]->i;
          st->items.push_back(pid->items[1]);  // the type, for messages
          stack_.push_back(st);
          break;
        }
        case 'R': {                                                    // REDUCE
          if (stack_.size() < 2) return bad("REDUCE on a short stack");
          V args = stack_.back();
          stack_.pop_back();
          V fn = stack_.back();
          stack_.pop_back();
          ASSIGN_OR_RETURN(V r, reduce(fn, args));
          stack_.push_back(r);
          break;
        }
        case 'b': {                                                    // BUILD: state ignored (a dict's _metadata)
          if (stack_.size() < 2) return bad("BUILD on a short stack");
          stack_.pop_back();
          break;
        }
        default:
          return bad(Str() << "pickle opcode 0x" << std::hex << static_cast<int>(op) << std::dec << " at byte " << at
                           << " is not one torch.save writes");
      }
    }
  }

 private:
  Status bad(const std::string& m) const { return Corruption(Str() << what_ << ": data.pkl: " << m << " (byte " << i_ << ")"); }
  Status need(uint64_t k) const { return k <= n_ - i_ ? Status::OK() : bad("the pickle ends inside a value"); }
  Status line(std::string* out) {
    const void* nl = std::memchr(p_ + i_, '\n', std::min<size_t>(n_ - i_, 256));
    if (!nl) return bad("a GLOBAL name without its newline");
    const size_t e = static_cast<const uint8_t*>(nl) - p_;
    out->assign(reinterpret_cast<const char*>(p_ + i_), e - i_);
    i_ = e + 1;
    return Status::OK();
  }
  Status global(const std::string& g) {
    static const char* kAllowed[] = {"collections OrderedDict", "torch._utils _rebuild_tensor_v2",
                                     "torch._utils _rebuild_parameter", "torch._utils _rebuild_parameter_with_state"};
    bool ok = storage_type(g);
    for (const char* a : kAllowed) ok = ok || g == a;
    if (!ok)
      return Unimplemented(Str() << what_ << ": data.pkl calls '" << g
                                 << "', which a checkpoint of tensors does not need (it could run code); not loaded");
    V v = make(Value::kGlobal);
    v->s = g;
    stack_.push_back(v);
    return Status::OK();
  }
  StatusOr<V> reduce(const V& fn, const V& args) {
    if (fn->kind != Value::kGlobal || args->kind != Value::kTuple) return bad("REDUCE of something not a call");
    const auto& a = args->items;
    if (fn->s == "collections OrderedDict") return make(Value::kDict);
    if (fn->s == "torch._utils _rebuild_tensor_v2") {
      V t = make(Value::kTensor);
      if (a.size() < 4 || a[0]->kind != Value::kStorage || a[1]->kind != Value::kInt || !int_tuple(a[2], &t->shape) ||
          !int_tuple(a[3], &t->stride) || t->shape.size() != t->stride.size())
        return bad("_rebuild_tensor_v2 without (storage, offset, size, stride)");
      t->storage = a[0];
      t->offset = a[1]->i;
      return t;
    }
    // _rebuild_parameter(data, requires_grad, hooks[, state]): the tensor itself.
    if (a.empty() || a[0]->kind != Value::kTensor) return bad(fn->s + " without a tensor");
    return a[0];
  }

  const uint8_t* p_;
  size_t n_, i_ = 0;
  std::string what_;
  std::vector<V> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, V> memo_;
};

}  // namespace

bool TorchTensor::contiguous() const {
  int64_t expect = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] != 1 && stride[k] != expect) return false;
    expect *= shape[k];
  }
  return true;
}

StatusOr<std::vector<TorchTensor>> read_torch_zip(const uint8_t* data, size_t size, const std::string& what) {
  ASSIGN_OR_RETURN(auto entries, read_zip(data, size, what));
  std::string archive;
  for (const auto& [name, e] : entries) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      archive = name.substr(0, slash);
      break;
    }
  }
  if (archive.empty()) return Corruption(Str() << what << ": a zip archive without ARCHIVE/data.pkl: not a torch.save checkpoint");
  if (auto bo = entries.find(archive + "/byteorder"); bo != entries.end()) {
    const std::string order(reinterpret_cast<const char*>(data + bo->second.data), bo->second.size);
    if (order != "little") return Unimplemented(Str() << what << ": byteorder '" << order << "' (little-endian only)");
  }
  const ZipEntry pkl = entries.at(archive + "/data.pkl");
  ASSIGN_OR_RETURN(V root, Unpickler(data + pkl.data, pkl.size, what).run());
  if (root->kind != Value::kDict) return Corruption(Str() << what << ": data.pkl does not hold a dict of tensors (a state dict)");
  std::vector<TorchTensor> out;
  for (size_t k = 0; k + 1 < root->items.size(); k += 2) {
    const V& key = root->items[k];
    const V& val = root->items[k + 1];
    if (val->kind != Value::kTensor) continue;
    if (key->kind != Value::kStr) return Corruption(Str() << what << ": a tensor under a key that is not a string");
    const Value& st = *val->storage;
    if (!st.dtype_ok)
      return Unimplemented(Str() << what << ": tensor '" << key->s << "' is a " << st.items[0]->s
                                 << " (float32, bfloat16, float16, int32, int64 and uint8 are read)");
    auto e = entries.find(archive + "/data/" + st.s);
    if (e == entries.end()) return Corruption(Str() << what << ": tensor '" << key->s << "': storage " << st.s << " is not in the archive");
    const uint64_t es = dtype_size(st.dtype);
    if (static_cast<uint64_t>(st.numel) > e->second.size / es)
      return Corruption(Str() << what << ": storage " << st.s << " holds " << e->second.size << " bytes, not " << st.numel << " elements");
    TorchTensor t;
    t.name = key->s;
    t.dtype = st.dtype;
    t.shape = val->shape;
    t.stride = val->stride;
    // The view's extent: offset + sum (size - 1) x stride must stay inside the storage.
    __int128 last = val->offset;
    bool ok = val->offset >= 0 && t.shape.size() <= 8;
    for (size_t d = 0; ok && d < t.shape.size(); ++d) {
      ok = t.shape[d] >= 0 && t.stride[d] >= 0 && t.shape[d] < (int64_t{1} << 40) && t.stride[d] < (int64_t{1} << 40);
      if (ok && t.shape[d] > 0) last += static_cast<__int128>(t.shape[d] - 1) * t.stride[d];
    }
    bool empty = false;
    for (int64_t s : t.shape) empty = empty || s == 0;
    if (!ok || (!empty && last >= st.numel))
      return Corruption(Str() << what << ": tensor '" << t.name << "' reaches past its storage " << st.s << " (" << st.numel << " elements)");
    t.file_offset = e->second.data + static_cast<uint64_t>(val->offset) * es;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace st
