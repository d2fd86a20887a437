// Apache Arrow IPC reader: the rows of an .arrow file as JSON objects, for datasets kept as
// Hugging Face `datasets` writes them (save_to_disk's data-0000i-of-0000N.arrow, its cache files)
// (docs: arrow.apache.org/docs/format/Columnar.html, Message.fbs / Schema.fbs; written from the
// format specification).
//
// Note [Arrow IPC]
// Reads the streaming format (what `datasets` writes: each message 0xFFFFFFFF, a 32-bit metadata
// length, a Message flatbuffer, then its body; the pre-0.15 form without the 0xFFFFFFFF too) and
// the file format ("ARROW1", the same stream, a footer), little-endian, metadata V4 and V5:
// a Schema, then RecordBatches. Types: Null, Bool, Int (8-64, signed or not), FloatingPoint (16,
// 32, 64), Utf8 / LargeUtf8 (must be UTF-8), Binary / LargeBinary / FixedSizeBinary (a string when
// UTF-8, else null), List / LargeList / FixedSizeList (arrays), Struct (objects), Map (objects,
// keys as text), Date / Time / Timestamp / Duration (their integer), Decimal and Interval (null).
// Refused by name (Unimplemented): compressed bodies, dictionary-encoded fields, unions, views,
// run-end encoding, big-endian files.
//
// A row is an OrderedJson object, keys in schema order, null where the validity bitmap says so.
// Hostile input: every flatbuffer offset and vtable, buffer range, offset array entry, child
// length and nesting depth is checked before use; errors are Corruption naming the file, and
// the message, column and row where they apply.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/status.h"

namespace st {

// The first bytes of an Arrow IPC stream (0xFFFFFFFF) or file ("ARROW1").
bool looks_like_arrow(std::string_view bytes);

// Calls fn(row, index) for every row in order (index 0-based across the file); stops at the first
// error or non-OK status from fn. `name` names the bytes in errors.
Status for_each_arrow_row(std::string_view bytes, const std::string& name,
                          const std::function<Status(OrderedJson&&, int64_t)>& fn);

}  // namespace st
