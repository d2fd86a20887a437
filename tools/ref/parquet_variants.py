#!/usr/bin/env python3
"""Writes tests/fixtures/parquet/variants/: small Parquet files for writer options and column types
that tools/ref/parquet_fuzz.py exercised (and one it found we refused: a decimal256 column), with
expected.json holding pyarrow's rows in the reader's JSON conventions (parquet_fuzz.conv: temporal
values as their stored integers, maps as objects, decimals as doubles, NaN/inf as null, binary as
text when UTF-8 else null). tests/io/parquet_variants_test.cc compares the C++ reader against it
without pyarrow.

  python3 tools/ref/parquet_variants.py      # needs pyarrow; deterministic output
"""
import datetime, decimal, json, os, random, sys, uuid

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parquet_fuzz import conv, raw  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "parquet", "variants")
rnd = random.Random(7)
WORDS = ["hello", "日本語", "🤖", "e\u0301", "\u0000", "line\nbreak", "", "مرحبا", "👩‍👩‍👧", "Ω≈ç√"]


def s(n=4):
    return "".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, n)))


def chat(n, keys=("role", "content")):
    rows = []
    for i in range(n):
        if i % 9 == 4: rows.append(None); continue
        msgs = []
        for j in range(i % 5):
            msgs.append(None if (i + j) % 11 == 3 else {keys[0]: None if (i + j) % 7 == 5 else ["user", "assistant"][j % 2],
                                                         keys[1]: s(6)})
        rows.append(msgs)
    return rows


MSG = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
files = {}

# decimal256 (precision > 38: 26-byte FIXED_LEN_BYTE_ARRAY) and decimal128 next to a chat column:
# the fuzz found the whole file refused ("DECIMAL of 26 bytes"); now read as doubles.
N = 12
dec = pa.table({
    "messages": pa.array(chat(N), MSG),
    "d256": pa.array([None if i == 3 else decimal.Decimal(rnd.randint(-10**59, 10**59)).scaleb(-5) for i in range(N - 2)]
                     + [decimal.Decimal("-1.00000"), decimal.Decimal("0.00001")], pa.decimal256(60, 5)),
    "d256s0": pa.array([decimal.Decimal(v) for v in (0, -1, 1, 2**200, -(2**200), 255, -256, 10**40, -(10**40), 7, 8, 9)], pa.decimal256(76, 0)),
    "d128": pa.array([decimal.Decimal(rnd.randint(-10**37, 10**37)).scaleb(-10) for _ in range(N)], pa.decimal128(38, 10)),
})
files["decimal256.parquet"] = (dec, dict(compression="zstd"))
files["decimal256_plain_v2.parquet"] = (dec, dict(compression="none", use_dictionary=False, data_page_version="2.0", row_group_size=5))

# Dictionary pages overflowing into PLAIN fallback pages mid-chunk, tiny pages, several row groups.
N = 60
text = pa.table({"id": pa.array(range(N), pa.int64()), "text": pa.array([s(3) * (1 + i % 4) for i in range(N)], pa.string()),
                 "messages": pa.array(chat(N), MSG)})
files["dict_fallback.parquet"] = (text, dict(compression="snappy", dictionary_pagesize_limit=16, data_page_size=64,
                                             row_group_size=25, write_batch_size=7))
# One row per page, page index, CRC checksums, bloom filters, statistics off, v2 pages.
files["pages_index_crc_bloom_v2.parquet"] = (text, dict(compression="lz4", max_rows_per_page=1, write_page_index=True,
                                                        write_page_checksum=True, write_statistics=False, data_page_version="2.0",
                                                        bloom_filter_options={"id": {"ndv": 64}, "text": {"ndv": 64}}))
# Content-defined chunking (page boundaries from a rolling hash), brotli.
files["cdc_brotli.parquet"] = (text, dict(compression="brotli", use_content_defined_chunking={"min_chunk_size": 64, "max_chunk_size": 512}))

# Non-compliant list naming (list.item), a ShareGPT chat column not first, large_* and view types,
# JSON extension, column names with a dot / spaces / non-ASCII, an all-null column, INT96 timestamps.
N = 20
conv_t = pa.list_(pa.struct([("from", pa.string()), ("value", pa.large_string())]))
odd = pa.table({
    "weird name.with dot": pa.array([s() for _ in range(N)], pa.large_string()),
    "名前 ✓": pa.array([None if i % 3 == 0 else i for i in range(N)], pa.int16()),
    "conversations": pa.array(chat(N, ("from", "value")), conv_t),
    "ids": pa.array([[rnd.randint(-2**31, 2**31 - 1) for _ in range(i % 6)] if i != 4 else None for i in range(N)], pa.large_list(pa.int32())),
    "sv": pa.array([s() for _ in range(N)], pa.string_view()),
    "bv": pa.array([b"\xff\xfe" if i == 2 else s().encode() for i in range(N)], pa.binary_view()),
    "js": pa.array([json.dumps({"k": i}) for i in range(N)], pa.json_()),
    "ts": pa.array([datetime.datetime(2001, 2, 3) + datetime.timedelta(seconds=i * 99991, microseconds=i) for i in range(N)], pa.timestamp("us")),
    "nothing": pa.nulls(N),
    "uid": pa.array([uuid.UUID(int=rnd.getrandbits(128)).bytes for _ in range(N)], pa.uuid()),
    "h": pa.array([None if i == 1 else float(i) / 8 for i in range(N)], pa.float16()),
})
files["noncompliant_views_int96.parquet"] = (odd, dict(compression="gzip", use_compliant_nested_type=False,
                                                       use_deprecated_int96_timestamps=True, row_group_size=7, store_schema=False))
files["noncompliant_delta_v2.parquet"] = (odd, dict(compression="zstd", use_compliant_nested_type=False, use_dictionary=False,
                                                    data_page_version="2.0", data_page_size=128,
                                                    column_encoding={"conversations.list.item.from": "DELTA_BYTE_ARRAY",
                                                                     "ids.list.item": "DELTA_BINARY_PACKED",
                                                                     "weird name.with dot": "DELTA_LENGTH_BYTE_ARRAY",
                                                                     "h": "BYTE_STREAM_SPLIT", "名前 ✓": "BYTE_STREAM_SPLIT"}))

# Tool-call chat: list<struct<role, content, tool_calls: list<struct<name, arguments: map>>>>, and
# decimals stored as INT32 / INT64 (store_decimal_as_integer).
call = pa.struct([("name", pa.string()), ("arguments", pa.map_(pa.string(), pa.string()))])
tool_t = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call))]))
N = 16
tool_rows = []
for i in range(N):
    if i == 5: tool_rows.append(None); continue
    tool_rows.append([{"role": "assistant", "content": None if j == 1 else s(),
                       "tool_calls": None if (i + j) % 4 == 0 else [
                           {"name": "f%d" % k, "arguments": None if k == 2 else [("a%d" % m, None if m == 1 else s()) for m in range(i % 3)]}
                           for k in range((i + j) % 4)]} for j in range(i % 4)])
tools = pa.table({"messages": pa.array(tool_rows, tool_t),
                  "d9": pa.array([decimal.Decimal(i * 12345 - 70000).scaleb(-2) for i in range(N)], pa.decimal128(9, 2)),
                  "d18": pa.array([decimal.Decimal(i * 10**15 - 7).scaleb(-4) for i in range(N)], pa.decimal128(18, 4))})
files["tool_calls_decint.parquet"] = (tools, dict(compression="snappy", store_decimal_as_integer=True, data_page_size=64))

# No rows at all, and a float column with NaN / inf / -0.0 (read as null, null, -0.0).
files["empty.parquet"] = (pa.table({"messages": pa.array([], MSG), "text": pa.array([], pa.string())}), dict())
files["floats_bss.parquet"] = (pa.table({"f": pa.array([float("nan"), float("inf"), -0.0, 1.5, None, -float("inf")], pa.float32()),
                                         "d": pa.array([1e-310, float("nan"), 2.5, None, -0.0, 1e308], pa.float64())}),
                               dict(use_dictionary=False, use_byte_stream_split=True, compression="none"))


def expected(path):
    t = pq.read_table(path)
    cols = {f.name: raw(t.column(f.name)) for f in t.schema}
    rows = [dict() for _ in range(t.num_rows)]
    for name, col in cols.items():
        for i, v in enumerate(col.to_pylist()):
            rows[i][name] = conv(v, col.type)
    return {"rows": rows, "row_groups": pq.ParquetFile(path).metadata.num_row_groups}


os.makedirs(OUT, exist_ok=True)
exp = {}
for name, (table, kw) in sorted(files.items()):
    path = os.path.join(OUT, name)
    pq.write_table(table, path, **kw)
    exp[name] = expected(path)
    print("%-36s %7d bytes  %d rows  %d row groups" % (name, os.path.getsize(path), table.num_rows, exp[name]["row_groups"]))
with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as fh:
    json.dump(exp, fh, ensure_ascii=False, separators=(",", ":"))
