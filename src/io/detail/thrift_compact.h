// Thrift compact protocol reader: the encoding of a Parquet file's footer (FileMetaData) and of
// its page headers. Reads one bounded byte range; nothing here allocates from a size in the input
// except read_binary's view (which points into the range).
//
// Errors are sticky: after the first problem every read returns a zero value, next_field()
// returns false, and error() says what went wrong and at which byte offset of the range. Callers
// parse a whole struct and check failed() once at the end. Every list, set, map and string length
// is checked against the bytes left before it is used (each element takes at least one byte), and
// nesting is capped at kMaxDepth, so hostile input can neither allocate nor recurse without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace st::thrift {

// Compact-protocol type ids (the low nibble of a field header or a list header).
enum CType : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12, kUuid = 13,
};
const char* ctype_name(uint8_t t);

struct FieldHeader {
  int16_t id = 0;
  uint8_t type = kStop;
};

class CompactReader {
 public:
  static constexpr int kMaxDepth = 64;

  CompactReader(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  // Struct framing: call begin_struct() before the first next_field() of a struct and
  // end_struct() after next_field() returned false (field ids are delta-coded per struct).
  void begin_struct();
  void end_struct();
  // Reads the next field header; false at the struct's STOP byte or after an error.
  bool next_field(FieldHeader* f);
  // True when f has type `want` (kTrue and kFalse are one type, bool); otherwise records an
  // error naming the struct and field and returns false.
  bool expect(const FieldHeader& f, uint8_t want, const char* strct, const char* field);

  bool field_bool(const FieldHeader& f) const { return f.type == kTrue; }  // a bool field's value
  int8_t read_byte();
  int16_t read_i16() { return static_cast<int16_t>(read_zigzag()); }
  int32_t read_i32();
  int64_t read_i64() { return read_zigzag(); }
  double read_double();
  std::string_view read_binary();  // a view into the input range
  // List/set header: returns the element count (<= bytes left) and sets *elem_type.
  uint32_t read_list_header(uint8_t* elem_type);
  bool read_list_bool();           // one element of a list<bool>
  void skip(uint8_t type);         // skips one value of `type`, nested values included

  void fail(const std::string& msg);
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

 private:
  uint64_t read_varint();
  int64_t read_zigzag();
  bool enter();  // depth + 1, false (and failed) past kMaxDepth
  void skip_depth(uint8_t type);

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  int depth_ = 0;
  int16_t last_id_ = 0;
  int16_t saved_ids_[kMaxDepth + 1] = {};
  bool failed_ = false;
  std::string error_;
};

}  // namespace st::thrift
