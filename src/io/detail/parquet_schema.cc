#include "io/detail/parquet_schema.h"

namespace st::parquet {
namespace {

bool is_group(const SchemaElement& e) { return e.num_children > 0; }

bool is_list(const SchemaElement& e) { return e.logical == Logical::kList || e.converted_type == kCtList; }

bool is_map(const SchemaElement& e) {
  return e.logical == Logical::kMap || e.converted_type == kCtMap || e.converted_type == kCtMapKeyValue;
}

bool is_decimal(const SchemaElement& e) { return e.logical == Logical::kDecimal || e.converted_type == kCtDecimal; }

bool is_unsigned(const SchemaElement& e) {
  if (e.logical == Logical::kInteger) return !e.int_signed;
  return e.converted_type >= kCtUint8 && e.converted_type <= kCtUint64;
}

bool is_text(const SchemaElement& e) {
  return e.logical == Logical::kString || e.logical == Logical::kEnum || e.logical == Logical::kJson ||
         e.converted_type == kCtUtf8 || e.converted_type == kCtEnum || e.converted_type == kCtJson;
}

StatusOr<LeafKind> leaf_kind(const SchemaElement& e) {
  switch (e.type) {
    case kBoolean: return LeafKind::kBool;
    case kInt32:
      if (is_decimal(e)) return LeafKind::kDecimalInt;
      return is_unsigned(e) ? LeafKind::kUInt32 : LeafKind::kInt;
    case kInt64:
      if (is_decimal(e)) return LeafKind::kDecimalInt;
      return is_unsigned(e) ? LeafKind::kUInt64 : LeafKind::kInt;
    case kInt96: return LeafKind::kInt;  // nanoseconds since the epoch
    case kFloat:
    case kDouble: return LeafKind::kFloat;
    case kByteArray:
      if (is_decimal(e)) return LeafKind::kDecimalBytes;
      return is_text(e) ? LeafKind::kString : LeafKind::kBinary;
    case kFixedLenByteArray:
      if (e.type_length <= 0 || e.type_length > (1 << 20))
        return Corruption(Str() << "FIXED_LEN_BYTE_ARRAY of length " << e.type_length);
      if (e.logical == Logical::kFloat16) {
        if (e.type_length != 2) return Corruption(Str() << "FLOAT16 of length " << e.type_length);
        return LeafKind::kFloat16;
      }
      if (e.logical == Logical::kUuid) {
        if (e.type_length != 16) return Corruption(Str() << "UUID of length " << e.type_length);
        return LeafKind::kUuid;
      }
      // Any width: pyarrow writes decimal256 (precision > 38) as up to 32 bytes; a Hub dataset
      // with such a column must still load (its value becomes a double, like narrower ones).
      if (is_decimal(e)) return LeafKind::kDecimalBytes;
      return is_text(e) ? LeafKind::kString : LeafKind::kBinary;
    default:
      return Corruption(Str() << "unknown physical type " << e.type);
  }
}

}  // namespace

Status Schema::add_node(const std::vector<SchemaElement>& els, size_t* next, int parent, int depth) {
  if (*next >= els.size()) return Corruption("schema: the groups' children run past the end of the element list");
  const size_t at = (*next)++;
  const SchemaElement& e = els[at];
  const std::string what = Str() << "schema element " << at << " ('" << e.name << "')";
  if (depth > kMaxDepth) return Corruption(Str() << what << ": nested deeper than " << kMaxDepth << " levels");
  const int id = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  nodes_[id].el = &e;
  if (parent >= 0) {
    if (e.repetition < kRequired || e.repetition > kRepeated)
      return Corruption(Str() << what << ": repetition type " << e.repetition);
    const Node& p = nodes_[parent];
    nodes_[id].def = p.def + (e.repetition != kRequired);
    nodes_[id].rep = p.rep + (e.repetition == kRepeated);
    nodes_[id].parts = p.parts;
    nodes_[id].parts.push_back(e.name);
    nodes_[id].path = p.path.empty() ? e.name : p.path + "." + e.name;
    nodes_[parent].children.push_back(id);
  }
  if (is_group(e)) {
    if (static_cast<size_t>(e.num_children) > els.size() - *next)
      return Corruption(Str() << what << ": " << e.num_children << " children, only " << els.size() - *next
                              << " elements follow");
    for (int32_t i = 0; i < e.num_children; ++i) RETURN_IF_ERROR(add_node(els, next, id, depth + 1));
    return Status::OK();
  }
  if (parent < 0) return Corruption("the schema has no columns");
  if (e.type < 0) return Corruption(Str() << what << ": neither a physical type nor children");
  LeafColumn leaf;
  leaf.path = nodes_[id].path;
  leaf.parts = nodes_[id].parts;
  leaf.type = e.type;
  leaf.type_length = e.type_length;
  leaf.max_def = nodes_[id].def;
  leaf.max_rep = nodes_[id].rep;
  leaf.scale = e.decimal_scale;
  ASSIGN_OR_RETURN(leaf.kind, leaf_kind(e), "column '" << leaf.path << "'");
  nodes_[id].leaf = static_cast<int>(leaves_.size());
  leaves_.push_back(std::move(leaf));
  return Status::OK();
}

StatusOr<int> Schema::build_shape(int node, int parent_shape, bool as_element) {
  const int s = static_cast<int>(shapes_.size());
  shapes_.emplace_back();
  shapes_[s].parent = parent_shape;
  const Node n = nodes_[node];  // a copy: nodes_ is stable, but keep references out of the recursion
  const SchemaElement& e = *n.el;
  shapes_[s].name = e.name;
  if (node != 0 && e.repetition == kRepeated && !as_element) {  // an un-annotated repeated field
    shapes_[s].kind = ShapeKind::kArray;
    shapes_[s].def_null = n.def - 1;
    shapes_[s].def_empty = n.def;
    shapes_[s].rep = n.rep;
    ASSIGN_OR_RETURN(int child, build_shape(node, s, true));
    shapes_[s].children = {child};
    return s;
  }
  if (!is_group(e)) {
    shapes_[s].kind = ShapeKind::kLeaf;
    shapes_[s].def_null = n.def;
    shapes_[s].column = n.leaf;
    leaves_[n.leaf].shape = s;
    return s;
  }
  const int r = n.children.size() == 1 ? n.children[0] : -1;
  const bool one_repeated = r >= 0 && nodes_[r].el->repetition == kRepeated;
  if (node != 0 && one_repeated && (is_list(e) || (is_map(e) && is_group(*nodes_[r].el) && nodes_[r].children.size() <= 2))) {
    const Node& rn = nodes_[r];
    shapes_[s].kind = ShapeKind::kArray;
    shapes_[s].def_null = n.def;
    shapes_[s].def_empty = rn.def;
    shapes_[s].rep = rn.rep;
    int element = r;  // LogicalTypes.md backward-compatibility rules for LIST
    if (is_list(e) && is_group(*rn.el) && rn.children.size() == 1 && rn.el->name != "array" &&
        rn.el->name != e.name + "_tuple")
      element = rn.children[0];  // 3-level: the repeated group only carries the repetition
    if (!is_list(e)) {
      shapes_[s].is_map = true;
      has_maps_ = true;
    }
    ASSIGN_OR_RETURN(int child, build_shape(element, s, element == r));
    shapes_[s].children = {child};
    return s;
  }
  shapes_[s].kind = ShapeKind::kObject;
  shapes_[s].def_null = n.def;
  for (int c : n.children) {
    ASSIGN_OR_RETURN(int child, build_shape(c, s, false));
    shapes_[s].children.push_back(child);
  }
  return s;
}

StatusOr<Schema> Schema::build(const std::vector<SchemaElement>& elements) {
  Schema sc;
  if (elements.empty()) return Corruption("empty schema");
  if (!is_group(elements[0])) return Corruption("the schema root has no children");
  size_t next = 0;
  RETURN_IF_ERROR(sc.add_node(elements, &next, -1, 0));
  if (next != elements.size())
    return Corruption(Str() << "schema: " << elements.size() - next << " elements after the root's last child");
  ASSIGN_OR_RETURN(int root, sc.build_shape(0, -1, false));
  (void)root;
  return sc;
}

}  // namespace st::parquet
