#include "io/detail/thrift_compact.h"

#include <cstring>

#include "core/status.h"

namespace st::thrift {

const char* ctype_name(uint8_t t) {
  static const char* const kNames[] = {"stop", "bool", "bool", "byte", "i16", "i32", "i64", "double",
                                       "binary", "list", "set", "map", "struct", "uuid"};
  return t < sizeof(kNames) / sizeof(kNames[0]) ? kNames[t] : "unknown";
}

void CompactReader::fail(const std::string& msg) {
  if (failed_) return;
  failed_ = true;
  error_ = Str() << msg << " (byte " << pos_ << " of " << n_ << ")";
  pos_ = n_;  // nothing more is read
}

bool CompactReader::enter() {
  if (failed_) return false;
  if (depth_ >= kMaxDepth) {
    fail(Str() << "nesting deeper than " << kMaxDepth);
    return false;
  }
  ++depth_;
  return true;
}

void CompactReader::begin_struct() {
  if (!enter()) return;
  saved_ids_[depth_] = last_id_;
  last_id_ = 0;
}

void CompactReader::end_struct() {
  if (depth_ == 0) return;  // only after a failed begin_struct
  last_id_ = saved_ids_[depth_];
  --depth_;
}

uint64_t CompactReader::read_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= n_) {
      fail("truncated varint");
      return 0;
    }
    const uint8_t b = p_[pos_++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("varint longer than 10 bytes");
  return 0;
}

int64_t CompactReader::read_zigzag() {
  const uint64_t u = read_varint();
  return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
}

int32_t CompactReader::read_i32() {
  const int64_t v = read_zigzag();
  if (v < INT32_MIN || v > INT32_MAX) {
    fail(Str() << "i32 value " << v << " out of range");
    return 0;
  }
  return static_cast<int32_t>(v);
}

int8_t CompactReader::read_byte() {
  if (pos_ >= n_) {
    fail("truncated byte");
    return 0;
  }
  return static_cast<int8_t>(p_[pos_++]);
}

double CompactReader::read_double() {
  if (left() < 8) {
    fail("truncated double");
    return 0;
  }
  double d;
  std::memcpy(&d, p_ + pos_, 8);  // little-endian on every target we build for
  pos_ += 8;
  return d;
}

std::string_view CompactReader::read_binary() {
  const uint64_t len = read_varint();
  if (failed_) return {};
  if (len > left()) {
    fail(Str() << "string of " << len << " bytes, only " << left() << " left");
    return {};
  }
  std::string_view v(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
  pos_ += static_cast<size_t>(len);
  return v;
}

uint32_t CompactReader::read_list_header(uint8_t* elem_type) {
  *elem_type = kStop;
  if (pos_ >= n_) {
    fail("truncated list header");
    return 0;
  }
  const uint8_t b = p_[pos_++];
  uint64_t count = b >> 4;
  if (count == 15) count = read_varint();
  *elem_type = b & 0x0f;
  if (failed_) return 0;
  if (count > left()) {  // every element takes at least one byte
    fail(Str() << "list of " << count << " elements, only " << left() << " bytes left");
    return 0;
  }
  return static_cast<uint32_t>(count);
}

bool CompactReader::read_list_bool() { return read_byte() == 1; }

bool CompactReader::next_field(FieldHeader* f) {
  if (failed_) return false;
  if (pos_ >= n_) {
    fail("truncated struct (no stop byte)");
    return false;
  }
  const uint8_t b = p_[pos_++];
  if (b == 0) return false;
  f->type = b & 0x0f;
  const int delta = b >> 4;
  if (delta != 0) {
    const int id = last_id_ + delta;
    if (id > INT16_MAX) {
      fail("field id out of range");
      return false;
    }
    f->id = static_cast<int16_t>(id);
  } else {
    const int64_t id = read_zigzag();
    if (id < INT16_MIN || id > INT16_MAX) {
      fail(Str() << "field id " << id << " out of range");
      return false;
    }
    f->id = static_cast<int16_t>(id);
  }
  if (failed_) return false;
  if (f->type > kUuid) {
    fail(Str() << "field " << f->id << " has unknown type " << int{f->type});
    return false;
  }
  last_id_ = f->id;
  return true;
}

bool CompactReader::expect(const FieldHeader& f, uint8_t want, const char* strct, const char* field) {
  const bool is_bool = f.type == kTrue || f.type == kFalse;
  if (want == kTrue ? is_bool : f.type == want) return true;
  fail(Str() << strct << "." << field << " (field " << f.id << ") has type " << ctype_name(f.type) << ", expected "
             << ctype_name(want));
  return false;
}

void CompactReader::skip(uint8_t type) { skip_depth(type); }

void CompactReader::skip_depth(uint8_t type) {
  if (failed_) return;
  switch (type) {
    case kTrue:
    case kFalse:
      return;  // a bool field carries its value in the type nibble
    case kByte:
      read_byte();
      return;
    case kI16:
    case kI32:
    case kI64:
      read_varint();
      return;
    case kDouble:
      if (left() < 8) fail("truncated double");
      else pos_ += 8;
      return;
    case kBinary:
      read_binary();
      return;
    case kUuid:
      if (left() < 16) fail("truncated uuid");
      else pos_ += 16;
      return;
    case kList:
    case kSet: {
      uint8_t et;
      const uint32_t count = read_list_header(&et);
      if (failed_ || !enter()) return;
      for (uint32_t i = 0; i < count && !failed_; ++i) {
        if (et == kTrue || et == kFalse) read_byte();  // list bools take a byte each
        else skip_depth(et);
      }
      --depth_;
      return;
    }
    case kMap: {
      const uint64_t count = read_varint();
      if (failed_ || count == 0) return;
      if (count > left() / 2) {
        fail(Str() << "map of " << count << " entries, only " << left() << " bytes left");
        return;
      }
      const uint8_t kv = static_cast<uint8_t>(read_byte());
      if (failed_ || !enter()) return;
      for (uint64_t i = 0; i < count && !failed_; ++i) {
        for (uint8_t t : {static_cast<uint8_t>(kv >> 4), static_cast<uint8_t>(kv & 0x0f)}) {
          if (t == kTrue || t == kFalse) read_byte();
          else skip_depth(t);
        }
      }
      --depth_;
      return;
    }
    case kStruct: {
      begin_struct();
      FieldHeader f;
      while (next_field(&f)) skip_depth(f.type);
      end_struct();
      return;
    }
    default:
      fail(Str() << "cannot skip a value of type " << int{type});
  }
}

}  // namespace st::thrift
