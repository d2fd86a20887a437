// The Parquet schema as a tree, its leaf columns with their maximum definition / repetition
// levels, and the JSON shape each row takes.
//
// Note [JSON shape]: a row is a JSON object whose keys are the top-level fields in schema order.
// A group is an object; a LIST-annotated group is an array (the standard 3-level layout
// `list { repeated group list { element } }` and the legacy 2-level ones, told apart by the
// backward-compatibility rules of the format's LogicalTypes.md); a MAP-annotated group is an
// object (keys written as text); any other repeated field is an array of its values; a leaf is a
// JSON scalar. Each shape node says below which definition level it is null (def_null) and, for
// arrays, below which it is empty (def_empty) and its repetition level (rep): this is what
// parquet_assemble.cc needs to put each (repetition, definition, value) triple of a column where
// it belongs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/detail/parquet_meta.h"

namespace st::parquet {

// How a leaf's values become JSON.
enum class LeafKind : uint8_t {
  kBool, kInt, kUInt32, kUInt64, kDecimalInt, kFloat, kString, kBinary, kFloat16, kUuid, kDecimalBytes,
};

struct LeafColumn {
  std::string path;               // dotted schema path, e.g. "messages.list.element.content"
  std::vector<std::string> parts; // the same, as path_in_schema lists it
  int32_t type = 0;               // physical type
  int32_t type_length = 0;
  int max_def = 0, max_rep = 0;
  LeafKind kind = LeafKind::kInt;
  int32_t scale = 0;              // decimals
  int shape = -1;                 // its kLeaf shape node
};

enum class ShapeKind : uint8_t { kObject, kArray, kLeaf };

struct Shape {
  ShapeKind kind = ShapeKind::kObject;
  bool is_map = false;   // a kArray of {key, value} objects written as one JSON object
  std::string name;      // key in the parent object
  int parent = -1;
  std::vector<int> children;  // kObject: fields in order; kArray: {element}
  int def_null = 0;      // definition levels below this: the value is null
  int def_empty = 0;     // kArray: below this (and >= def_null): []
  int rep = 0;           // kArray: repetition level of its elements
  int column = -1;       // kLeaf
};

class Schema {
 public:
  static constexpr int kMaxDepth = 64;  // levels fit a byte

  // Builds the tree from the footer's flattened schema list (element 0 is the root). Errors
  // (Corruption, or Unimplemented for a type we do not read) name the element.
  static StatusOr<Schema> build(const std::vector<SchemaElement>& elements);

  const std::vector<LeafColumn>& leaves() const { return leaves_; }
  const std::vector<Shape>& shapes() const { return shapes_; }  // [0] is the row object
  bool has_maps() const { return has_maps_; }

 private:
  struct Node {
    const SchemaElement* el = nullptr;
    std::vector<int> children;
    int def = 0, rep = 0;
    int leaf = -1;  // index in leaves_ for a leaf
    std::string path;
    std::vector<std::string> parts;
  };
  Status add_node(const std::vector<SchemaElement>& els, size_t* next, int parent, int depth);
  StatusOr<int> build_shape(int node, int parent_shape, bool as_element);
  Status add_leaf(int node, int shape);

  std::vector<Node> nodes_;
  std::vector<LeafColumn> leaves_;
  std::vector<Shape> shapes_;
  bool has_maps_ = false;
};

}  // namespace st::parquet
