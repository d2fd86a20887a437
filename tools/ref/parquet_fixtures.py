#!/usr/bin/env python3
# Writes the Parquet reader's fixtures (tests/fixtures/parquet/) with pyarrow, and expected.json:
# every file's rows as pyarrow itself reads them back (Table.to_pylist(), maps turned into
# objects), which tests/io/parquet_test.cc compares the C++ reader against. Also chat.jsonl,
# chat.jsonl.gz, chat.parquet.gz and ids.jsonl: the records of chat.parquet / ids.parquet as JSON Lines, for
# tests/data/datasets_parquet_test.cc. Only this generator needs pyarrow; the test does not.
#   pip install pyarrow && python3 tools/ref/parquet_fixtures.py [--out tests/fixtures/parquet] [--only a.parquet,b.parquet]
# legacy_2level.parquet is written by hand below (pyarrow writes only the 3-level LIST layout):
# the 2-level layouts older writers used, and an un-annotated repeated field.
import argparse, gzip, json, os, random, struct, uuid

import pyarrow as pa
import pyarrow.parquet as pq

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/parquet"))
ap.add_argument("--only", default="", help="comma-separated file names: write only these (merged into expected.json)")
ARGS = ap.parse_args()
OUT = ARGS.out
os.makedirs(OUT, exist_ok=True)
rnd = random.Random(7)
WORDS = ["hello", "world", "ünïcödé", "日本語", "🤖", "Réponds", "quatre", "data", "tune", "the", "a", "stream", "—", "x"]


def sentence(n):
    return " ".join(rnd.choice(WORDS) for _ in range(n))


# ---- messages: list<struct<role, content>> with nulls at every level ----------------------------
def messages_rows():
    rows = [
        {"id": 1, "prompt": "Hi", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
        {"id": 2, "prompt": "ünïcödé 🤖", "messages": [{"role": "system", "content": "Réponds en français."},
                                                    {"role": "user", "content": "Combien font 2+2 ? 日本語も"},
                                                    {"role": "assistant", "content": "4 — quatre. 🎉"}]},
        {"id": 3, "prompt": None, "messages": []},                                   # empty list
        {"id": 4, "prompt": "x", "messages": None},                                  # null list
        {"id": None, "prompt": "y", "messages": [None, {"role": "user", "content": None},
                                                 {"role": None, "content": "c"}]},   # null element / fields
        {"id": 6, "prompt": "", "messages": [{"role": "user", "content": ""}]},      # empty strings
    ]
    for i in range(7, 41):
        turns = [{"role": "user" if t % 2 == 0 else "assistant", "content": sentence(rnd.randint(1, 9))} for t in range(rnd.randint(1, 4))]
        rows.append({"id": i, "prompt": sentence(2), "messages": turns})
    return rows


MSG_TYPE = pa.schema([("id", pa.int64()), ("prompt", pa.string()),
                      ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))])
msg = pa.Table.from_pylist(messages_rows(), schema=MSG_TYPE)
small = dict(row_group_size=16, data_page_size=64, write_batch_size=4, max_rows_per_page=5, store_schema=False)
files = {
    # name: (table, write_table kwargs)
    # dictionary_pagesize_limit: the dictionary fills up and later pages fall back to PLAIN
    "messages_snappy_v1.parquet": (msg, dict(small, compression="snappy", data_page_version="1.0", dictionary_pagesize_limit=200)),
    "messages_zstd_v2.parquet": (msg, dict(small, compression="zstd", data_page_version="2.0", write_page_index=True)),
    "messages_gzip_plain.parquet": (msg, dict(small, compression="gzip", use_dictionary=False, write_page_checksum=True)),
    "messages_none_v2.parquet": (msg, dict(small, compression="none", data_page_version="2.0", store_schema=True)),
    "messages_lz4_v2.parquet": (msg, dict(small, compression="lz4", data_page_version="2.0")),
    "messages_brotli_v1.parquet": (msg, dict(small, compression="brotli", data_page_version="1.0")),
}

# ---- tokenized: list<int64> input_ids and labels --------------------------------------------------
tok_rows = []
for i in range(30):
    ids = [rnd.randrange(0, 3000) for _ in range(rnd.randint(0 if i == 3 else 1, 40))]
    labels = None if i % 7 == 2 else [(-100 if k < 3 else t) for k, t in enumerate(ids)]
    tok_rows.append({"input_ids": ids, "labels": labels})
tok = pa.Table.from_pylist(tok_rows, schema=pa.schema([("input_ids", pa.list_(pa.int64())), ("labels", pa.list_(pa.int64()))]))
files["tokenized_snappy.parquet"] = (tok, dict(small, compression="snappy", data_page_size=256))
files["tokenized_delta_v2.parquet"] = (tok, dict(small, compression="zstd", data_page_version="2.0", use_dictionary=False,
                                                 column_encoding={"input_ids.list.element": "DELTA_BINARY_PACKED", "labels.list.element": "DELTA_BINARY_PACKED"}))

# ---- scalar types, nested structs, list<list>, maps, an all-null column ---------------------------
types_rows = []
for i in range(12):
    n = i % 4 == 3
    types_rows.append({
        "b": None if n else i % 2 == 0, "i8": None if n else i - 6, "u16": i * 5000, "u32": 4000000000 + i, "u64": 2**63 + i,
        "i32": -2**31 + i, "i64": 2**40 * (i - 5), "f": i / 4.0 - 1.0, "d": None if n else i * 1e-3,
        "h": None if i == 5 else float(i) / 2,
        "s": None if n else ("s%d é" % i) * (i % 3), "bin": b"\xff\xfe" if i == 7 else b"raw-%d" % i,
        "uuid": None if i == 9 else bytes(range(i * 7, i * 7 + 16)),
        "nothing": None,
        "st": None if i == 4 else {"a": None if i == 2 else i, "inner": None if i == 6 else {"z": "zz" if i % 2 else None}},
        "ll": None if i == 1 else [[j for j in range(k)] if k != 2 else None for k in range(i % 4)],
        "m": None if i == 0 else [("k%d" % j, None if j == 1 else j) for j in range(i % 3)],
    })
types_schema = pa.schema([
    ("b", pa.bool_()), ("i8", pa.int8()), ("u16", pa.uint16()), ("u32", pa.uint32()), ("u64", pa.uint64()),
    ("i32", pa.int32()), ("i64", pa.int64()), ("f", pa.float32()), ("d", pa.float64()), ("h", pa.float16()),
    ("s", pa.string()), ("bin", pa.binary()), ("uuid", pa.uuid()), ("nothing", pa.string()),
    ("st", pa.struct([("a", pa.int32()), ("inner", pa.struct([("z", pa.string())]))])),
    ("ll", pa.list_(pa.list_(pa.int32()))), ("m", pa.map_(pa.string(), pa.int32())),
])
types = pa.Table.from_pylist(types_rows, schema=types_schema)
files["types_snappy.parquet"] = (types, dict(small, compression="snappy"))
files["types_split_v2.parquet"] = (types, dict(small, compression="zstd", data_page_version="2.0", use_dictionary=False,
                                               column_encoding={"f": "BYTE_STREAM_SPLIT", "d": "BYTE_STREAM_SPLIT",
                                                                "i32": "DELTA_BINARY_PACKED", "s": "DELTA_BYTE_ARRAY",
                                                                "bin": "DELTA_LENGTH_BYTE_ARRAY", "i64": "BYTE_STREAM_SPLIT"}))

# ---- chat / ids: clean records for the dataset tests (the same records also as JSON Lines) ---------
chat_rows = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
             {"messages": [{"role": "user", "content": "Combien font 2+2 ? 日本語も 🤖"}, {"role": "assistant", "content": "4 — quatre."},
                           {"role": "user", "content": "Merci"}, {"role": "assistant", "content": "De rien"}]}]
for i in range(10):
    chat_rows.append({"messages": [{"role": "user", "content": sentence(rnd.randint(1, 6))},
                                   {"role": "assistant", "content": sentence(rnd.randint(1, 8))}]})
chat = pa.Table.from_pylist(chat_rows, schema=pa.schema([MSG_TYPE.field("messages")]))
files["chat.parquet"] = (chat, dict(small, compression="zstd"))
ids_rows = [{"input_ids": [rnd.randrange(1, 200) for _ in range(rnd.randint(2, 20))]} for _ in range(8)]
ids = pa.Table.from_pylist(ids_rows, schema=pa.schema([("input_ids", pa.list_(pa.int64()))]))
files["ids.parquet"] = (ids, dict(small, compression="gzip"))


# ---- legacy_2level.parquet: hand-written (thrift compact, uncompressed, PLAIN, v1 pages) ---------
class Thrift:
    def __init__(self):
        self.b, self.last = bytearray(), [0]

    def varint(self, v):
        while True:
            if v < 0x80:
                self.b.append(v); return
            self.b.append((v & 0x7f) | 0x80); v >>= 7

    def zz(self, v): self.varint((v << 1) ^ (v >> 63))

    def field(self, fid, t):
        d = fid - self.last[-1]
        if 0 < d <= 15: self.b.append(d << 4 | t)
        else: self.b.append(t); self.zz(fid)
        self.last[-1] = fid

    def i32(self, fid, v): self.field(fid, 5); self.zz(v)
    def i64(self, fid, v): self.field(fid, 6); self.zz(v)
    def binary(self, fid, s): self.field(fid, 8); s = s.encode() if isinstance(s, str) else s; self.varint(len(s)); self.b += s
    def begin(self, fid=None):
        if fid is not None: self.field(fid, 12)
        self.last.append(0)
    def end(self): self.b.append(0); self.last.pop()
    def list(self, fid, etype, n):
        self.field(fid, 9)
        if n < 15: self.b.append(n << 4 | etype)
        else: self.b.append(0xf0 | etype); self.varint(n)


def rle(levels):  # RLE/bit-packed hybrid, one RLE run per value (bit width <= 8)
    out = bytearray()
    for v in levels: out += bytes([2, v])
    return bytes(struct.pack("<I", len(out))) + out


def plain(ptype, vals):
    if ptype == 1: return b"".join(struct.pack("<i", v) for v in vals)
    return b"".join(struct.pack("<I", len(v.encode())) + v.encode() for v in vals)


def legacy_file(path):
    # (name, type, repetition, num_children, converted_type): pre-order, as the footer lists them.
    schema = [("schema", None, None, 4, None),
              ("tags", None, 1, 1, 3), ("array", 6, 2, None, 0),                   # 2-level: repeated primitive
              ("pairs", None, 1, 1, 3), ("array", None, 2, 2, None), ("a", 1, 0, None, None), ("b", 6, 1, None, 0),
              ("pts", None, 1, 1, 3), ("pts_tuple", None, 2, 1, None), ("x", 1, 0, None, None),
              ("rep", 1, 2, None, None)]                                             # un-annotated repeated
    rows = [  # (tags, pairs, pts, rep)
        (["a", "b"], [(1, "one"), (2, None)], [5], [1, 2, 3]),
        (None, [], None, []),
        ([], None, [6, 7], [4]),
    ]
    # Columns: (path, ptype, entries of (rep, def, value or None)), max levels.
    cols = {"tags.array": (6, [], 2, 1), "pairs.array.a": (1, [], 2, 1), "pairs.array.b": (6, [], 3, 1),
            "pts.pts_tuple.x": (1, [], 2, 1), "rep": (1, [], 1, 1)}
    def lst(name, items, defined=lambda v: True):  # a LIST: null, [], or elements (r, d, v)
        e = cols[name][1]
        if items is None: e.append((0, 0, None))
        elif not items: e.append((0, 1, None))
        else: e.extend((0 if k == 0 else 1, 2 + defined(v), v) for k, v in enumerate(items))
    for tags, pairs, pts, rep in rows:
        lst("tags.array", tags, lambda v: False)
        lst("pairs.array.a", None if pairs is None else [p[0] for p in pairs], lambda v: False)
        lst("pairs.array.b", None if pairs is None else [p[1] for p in pairs], lambda v: v is not None)
        lst("pts.pts_tuple.x", pts, lambda v: False)
        cols["rep"][1].extend([(0, 0, None)] if not rep else [(0 if k == 0 else 1, 1, v) for k, v in enumerate(rep)])
    data, chunks = bytearray(b"PAR1"), []
    for name, (ptype, entries, max_def, max_rep) in cols.items():
        vals = [v for r, d, v in entries if d == max_def]
        body = rle([r for r, d, v in entries]) + rle([d for r, d, v in entries]) + plain(ptype, vals)
        h = Thrift(); h.begin(); h.i32(1, 0); h.i32(2, len(body)); h.i32(3, len(body))
        h.begin(5); h.i32(1, len(entries)); h.i32(2, 0); h.i32(3, 3); h.i32(4, 3); h.end(); h.end()
        off = len(data); data += h.b + body
        chunks.append((name, ptype, off, len(data) - off, len(entries)))
    t = Thrift(); t.begin(); t.i32(1, 1)
    t.list(2, 12, len(schema))
    for name, ptype, repn, nch, conv in schema:
        t.begin()
        if ptype is not None: t.i32(1, ptype)
        if repn is not None: t.i32(3, repn)
        t.binary(4, name)
        if nch is not None: t.i32(5, nch)
        if conv is not None: t.i32(6, conv)
        t.end()
    t.i64(3, len(rows))
    t.list(4, 12, 1); t.begin(); t.list(1, 12, len(chunks))
    for name, ptype, off, size, nvals in chunks:
        t.begin(); t.i64(2, off); t.begin(3); t.i32(1, ptype); t.list(2, 5, 2); t.zz(0); t.zz(3)
        t.list(3, 8, len(name.split(".")))
        for p in name.split("."): t.varint(len(p)); t.b += p.encode()
        t.i32(4, 0); t.i64(5, nvals); t.i64(6, size); t.i64(7, size); t.i64(9, off); t.end(); t.end()
    t.i64(2, len(data) - 4); t.i64(3, len(rows)); t.end(); t.end()
    data += t.b + struct.pack("<I", len(t.b)) + b"PAR1"
    open(path, "wb").write(bytes(data))


def jsonable(v):
    if isinstance(v, bytes):  # un-annotated binary: text when UTF-8, else null (as the reader does)
        try: return v.decode()
        except UnicodeDecodeError: return None
    if isinstance(v, dict): return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list): return [jsonable(x) for x in v]
    if isinstance(v, uuid.UUID): return str(v)
    if hasattr(v, "item"): return v.item()  # numpy scalars (float16)
    return v


def row_json(r):
    r = jsonable(r)
    if isinstance(r.get("m"), list): r["m"] = {k: x for k, x in r["m"]}  # map: list of pairs -> object
    return r


ONLY = [n for n in ARGS.only.split(",") if n]
expected = {}
if ONLY:  # keep the other files and their expected rows as they are
    expected = json.load(open(os.path.join(OUT, "expected.json")))
    files = {n: files[n] for n in ONLY}
for name, (table, kw) in files.items():
    pq.write_table(table, os.path.join(OUT, name), **kw)
if not ONLY:
    legacy_file(os.path.join(OUT, "legacy_2level.parquet"))
for name in sorted(list(files) + ([] if ONLY else ["legacy_2level.parquet"])):
    path = os.path.join(OUT, name)
    f = pq.ParquetFile(path)
    rows = [row_json(r) for r in f.read().to_pylist()]
    expected[name] = {"rows": rows, "row_groups": f.metadata.num_row_groups}
    md = f.metadata
    codecs = sorted({md.row_group(g).column(c).compression for g in range(md.num_row_groups) for c in range(md.num_columns)})
    encs = sorted({e for g in range(md.num_row_groups) for c in range(md.num_columns) for e in md.row_group(g).column(c).encodings})
    print("%-28s %6d bytes  %d row groups  %s  %s" % (name, os.path.getsize(path), md.num_row_groups, codecs, encs))
expected = dict(sorted(expected.items()))
with open(os.path.join(OUT, "expected.json"), "w") as fh:
    json.dump(expected, fh, ensure_ascii=False, indent=None, separators=(",", ":"))
    fh.write("\n")
if ONLY:
    raise SystemExit(0)
for stem, rows in (("chat", chat_rows), ("ids", ids_rows)):
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    open(os.path.join(OUT, stem + ".jsonl"), "w").write(text)
    if stem == "chat":
        with open(os.path.join(OUT, "chat.jsonl.gz"), "wb") as fh:
            fh.write(gzip.compress(text.encode(), mtime=0))
        with open(os.path.join(OUT, "chat.parquet.gz"), "wb") as fh:
            fh.write(gzip.compress(open(os.path.join(OUT, "chat.parquet"), "rb").read(), mtime=0))
