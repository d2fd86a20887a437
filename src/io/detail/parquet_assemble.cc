#include "io/detail/parquet_assemble.h"

#include <cmath>
#include <cstring>

namespace st::parquet {
namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);  // zero and subnormals
    return sign ? -f : f;
  }
  const uint32_t bits = exp == 31 ? sign | 0x7f800000u | mant << 13 : sign | static_cast<uint32_t>(exp - 15 + 127) << 23 | mant << 13;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::string uuid_text(std::string_view b) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[static_cast<uint8_t>(b[i]) >> 4];
    s += kHex[static_cast<uint8_t>(b[i]) & 15];
  }
  return s;
}

// Big-endian two's complement scaled by 10^-scale. Up to 16 bytes exactly (__int128); wider ones
// (decimal256, or a long BYTE_ARRAY decimal) through the magnitude in long double, which keeps
// more bits than the double result needs (the value is approximate either way).
double decimal_bytes(std::string_view b, int32_t scale) {
  if (b.size() <= 16) {
    __int128 v = b.empty() || !(static_cast<uint8_t>(b[0]) & 0x80) ? 0 : -1;
    for (char c : b) v = static_cast<__int128>(static_cast<unsigned __int128>(v) << 8) | static_cast<uint8_t>(c);
    return static_cast<double>(v) / std::pow(10.0, scale);
  }
  const bool neg = static_cast<uint8_t>(b[0]) & 0x80;
  // The magnitude of a negative number: invert every byte, then add 1 (carried from the end).
  std::string mag(b);
  if (neg) {
    for (char& c : mag) c = static_cast<char>(~static_cast<uint8_t>(c));
    for (size_t i = mag.size(); i-- > 0;)
      if (++reinterpret_cast<uint8_t&>(mag[i]) != 0) break;
  }
  long double v = 0;
  for (char c : mag) v = v * 256 + static_cast<uint8_t>(c);
  v /= std::pow(10.0L, static_cast<long double>(scale));
  return static_cast<double>(neg ? -v : v);
}

}  // namespace

RowAssembler::RowAssembler(const Schema& schema, const std::vector<ColumnData>& columns, std::string where)
    : schema_(schema), columns_(columns), where_(std::move(where)) {
  const auto& shapes = schema.shapes();
  for (const LeafColumn& leaf : schema.leaves()) {
    std::vector<int> path;
    int arrays = 0;
    for (int s = leaf.shape; s >= 0; s = shapes[s].parent) {
      path.insert(path.begin(), s);
      arrays += shapes[s].kind == ShapeKind::kArray;
    }
    paths_.push_back(std::move(path));
    cursors_.emplace_back();
    cursors_.back().index.assign(static_cast<size_t>(arrays), 0);
  }
}

Status RowAssembler::leaf_value(size_t column, OrderedJson* out) {
  const LeafColumn& leaf = schema_.leaves()[column];
  const Values& v = columns_[column].values;
  const size_t i = cursors_[column].value++;
  if (i >= v.size()) return Internal(Str() << where_ << ": column '" << leaf.path << "' has fewer values than levels");
  if (v.type == kByteArray || v.type == kFixedLenByteArray) {
    row_bytes_ += v.str(i).size();
    if (row_bytes_ > kMaxRowBytes)
      return Corruption(Str() << where_ << ", row " << row_ << ": more than " << kMaxRowBytes << " bytes of text in one row");
  }
  switch (leaf.kind) {
    case LeafKind::kBool: *out = v.ints[i] != 0; return Status::OK();
    case LeafKind::kInt: *out = v.ints[i]; return Status::OK();
    case LeafKind::kUInt32: *out = static_cast<uint64_t>(static_cast<uint32_t>(v.ints[i])); return Status::OK();
    case LeafKind::kUInt64: *out = static_cast<uint64_t>(v.ints[i]); return Status::OK();
    case LeafKind::kDecimalInt: *out = static_cast<double>(v.ints[i]) / std::pow(10.0, leaf.scale); return Status::OK();
    case LeafKind::kFloat: *out = v.reals[i]; return Status::OK();
    case LeafKind::kString:
      if (!valid_utf8(v.str(i)))
        return Corruption(Str() << where_ << ", row " << row_ << ": column '" << leaf.path << "': a string value is not valid UTF-8");
      *out = std::string(v.str(i));
      return Status::OK();
    case LeafKind::kBinary:  // un-annotated bytes: text when they are UTF-8, else null
      if (valid_utf8(v.str(i))) *out = std::string(v.str(i));
      else *out = nullptr;
      return Status::OK();
    case LeafKind::kFloat16: {
      const std::string_view b = v.str(i);
      *out = half_to_float(static_cast<uint16_t>(static_cast<uint8_t>(b[0]) | static_cast<uint8_t>(b[1]) << 8));
      return Status::OK();
    }
    case LeafKind::kUuid: *out = uuid_text(v.str(i)); return Status::OK();
    case LeafKind::kDecimalBytes:
      *out = decimal_bytes(v.str(i), leaf.scale);
      return Status::OK();
  }
  return Internal("unknown leaf kind");
}

// Puts one (rep, def) entry of `column` where it belongs in *row (Note [JSON shape]): each array
// on the path either starts over (rep below its level: a new parent element), moves to its next
// element (rep equal to its level) or stays on the current one (rep above). Index counters are per
// column, so the second column of a struct fills the elements the first one created.
Status RowAssembler::insert(size_t column, int rep, int def, OrderedJson* row) {
  const auto& shapes = schema_.shapes();
  const std::vector<int>& path = paths_[column];
  Cursor& cur = cursors_[column];
  OrderedJson* node = row;
  size_t array = 0;
  for (size_t k = 1; k < path.size(); ++k) {
    const Shape& parent = shapes[path[k - 1]];
    const Shape& s = shapes[path[k]];
    OrderedJson* slot;
    if (parent.kind == ShapeKind::kObject) {
      slot = &(*node)[s.name];
    } else {
      size_t& idx = cur.index[array++];
      if (rep < parent.rep) idx = 0;
      else if (rep == parent.rep) ++idx;
      if (idx > node->size())
        return Corruption(Str() << where_ << ", row " << row_ << ": column '" << schema_.leaves()[column].path
                                << "': repetition levels out of step with the other columns");
      if (idx == node->size()) node->push_back(nullptr);
      slot = &(*node)[idx];
    }
    if (def < s.def_null) return Status::OK();
    switch (s.kind) {
      case ShapeKind::kLeaf:
        return leaf_value(column, slot);
      case ShapeKind::kObject:
        if (!slot->is_object()) *slot = OrderedJson::object();
        break;
      case ShapeKind::kArray:
        if (!slot->is_array()) *slot = OrderedJson::array();
        if (def < s.def_empty) return Status::OK();
        break;
    }
    node = slot;
  }
  return Status::OK();
}

void RowAssembler::convert_maps(int shape, OrderedJson* v) const {
  const Shape& s = schema_.shapes()[shape];
  if (v->is_null() || s.kind == ShapeKind::kLeaf) return;
  if (s.kind == ShapeKind::kObject) {
    if (!v->is_object()) return;
    for (int c : s.children) {
      auto it = v->find(schema_.shapes()[c].name);
      if (it != v->end()) convert_maps(c, &*it);
    }
    return;
  }
  if (!v->is_array()) return;
  for (auto& e : *v) convert_maps(s.children[0], &e);
  if (!s.is_map) return;
  const Shape& kv = schema_.shapes()[s.children[0]];
  OrderedJson obj = OrderedJson::object();
  for (const auto& e : *v) {
    if (!e.is_object() || kv.children.empty()) continue;
    auto k = e.find(schema_.shapes()[kv.children[0]].name);
    if (k == e.end()) continue;
    const std::string key = k->is_string() ? k->get<std::string>() : k->dump();
    OrderedJson value;
    if (kv.children.size() > 1) {
      auto val = e.find(schema_.shapes()[kv.children[1]].name);
      if (val != e.end()) value = *val;
    }
    obj[key] = std::move(value);
  }
  *v = std::move(obj);
}

Status RowAssembler::next(OrderedJson* row) {
  *row = OrderedJson::object();
  row_bytes_ = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const ColumnData& d = columns_[c];
    Cursor& cur = cursors_[c];
    if (cur.entry >= d.def.size())
      return Corruption(Str() << where_ << ", row " << row_ << ": column '" << schema_.leaves()[c].path << "' has no more rows");
    do {
      RETURN_IF_ERROR(insert(c, d.rep[cur.entry], d.def[cur.entry], row));
      ++cur.entry;
    } while (cur.entry < d.def.size() && d.rep[cur.entry] != 0);
  }
  if (schema_.has_maps()) convert_maps(0, row);
  ++row_;
  return Status::OK();
}

}  // namespace st::parquet
