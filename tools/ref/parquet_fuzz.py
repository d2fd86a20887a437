#!/usr/bin/env python3
"""Randomized differential fuzz of streamtune's Parquet reader (src/io/parquet*) against pyarrow.

Writes random Parquet files shaped like Hugging Face Hub dataset shards (text / instruction /
prompt columns, chat columns list<struct<role,content>> and list<struct<from,value>>, token-id
lists, and extra columns of many other types the reader must get through), with random writer
options (row group and page sizes, write batch size, data page v1/v2, dictionary on/off and
dictionary fallback, every codec, statistics, page index, checksums, explicit column encodings,
non-compliant list naming, parquet format versions). Each file is read by tools/ref/parquet_dump
(built here against a build dir's static libraries) and by pyarrow; rows must match exactly
(floats: NaN/inf read as JSON null by both sides' conventions, decimals within 1e-9 relative).
pyarrow 26 cannot read back some of its own files (nested columns with DELTA_BYTE_ARRAY, or with
list.item naming and page indexes: it errors or silently returns fewer rows); such a column is
checked against the table that was written instead (expected_rows).

  python3 tools/ref/parquet_fuzz.py --build /tmp/pqbuild --n 300 --seed 1 [--keep DIR]

Needs pyarrow (pip install pyarrow); only this tool does, never the build or the tests. Prints one
line per failing file (kept under --keep) and a summary by outcome.
"""
import argparse, datetime, decimal, json, math, os, random, subprocess, sys, tempfile, uuid

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def build_driver(build_dir):
    """Compiles parquet_dump.cc against BUILD/libst_{io,core}.a and the codec libraries CMake found."""
    exe = os.path.join(build_dir, "parquet_dump")
    src = os.path.join(ROOT, "tools", "ref", "parquet_dump.cc")
    libs = [os.path.join(build_dir, "libst_%s.a" % m) for m in ("io", "core")]
    for lib in libs:
        if not os.path.exists(lib):
            sys.exit("missing %s: build the st_io target first (ninja -C %s st_io)" % (lib, build_dir))
    if os.path.exists(exe) and all(os.path.getmtime(exe) > os.path.getmtime(p) for p in libs + [src]):
        return exe
    cache = dict(l.split("=", 1) for l in open(os.path.join(build_dir, "CMakeCache.txt")).read().splitlines()
                 if "=" in l and not l.startswith(("#", "//")))
    codec = [cache[k] for k in ("SNAPPY_LIB:FILEPATH", "ZSTD_LIB:FILEPATH", "LZ4_LIB:FILEPATH",
                                "BROTLIDEC_LIB:FILEPATH", "BROTLICOMMON_LIB:FILEPATH")]
    cmd = ["c++", "-std=c++20", "-O2", "-I", os.path.join(ROOT, "src"), src] + libs + codec + ["-lz", "-lpthread", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


# ---- random values -------------------------------------------------------------------------------
PIECES = ["hello", "world", "the", "quick", "fox", " ", " ", "\n", "\t", "日本語", "中文字符", "한국어", "🤖", "🎉",
          "👩‍👩‍👧", "e\u0301", "a\u0308\u0323", "مرحبا", "\u0000", "\r\n", "Ω≈ç√", "\ufeff", "𝕏", "—", "\"quoted\"",
          "\\back", "{json}", "<tag>", "ß", "İ", "\u200d", "\U0010fffd"]


def text(r, maxlen=60):
    if r.random() < 0.08: return ""
    if getattr(r, "long_budget", 0) > 0 and r.random() < 0.01:  # a long string: up to a few MB, a few a file
        r.long_budget -= 1
        unit = "".join(r.choice(PIECES) for _ in range(50))
        return (unit * (r.randint(10_000, 3_000_000) // len(unit) + 1))[: r.randint(10_000, 3_000_000)]
    return "".join(r.choice(PIECES) for _ in range(r.randint(1, maxlen // 4 + 1)))


def maybe(r, p, f):
    return None if r.random() < p else f()


def rlist(r, f, maxn=6, pnull_el=0.0):
    return [None if r.random() < pnull_el else f() for _ in range(r.randint(0, maxn))]


# Column generators: name stem -> (arrow type, value(r, pnull)). Each returns (type, fn).
def col_string(r): return pa.string(), lambda r, p: maybe(r, p, lambda: text(r))
def col_large_string(r): return pa.large_string(), lambda r, p: maybe(r, p, lambda: text(r))
def col_dict_string(r):
    vocab = [text(r, 12) for _ in range(r.randint(1, 8))]
    return pa.dictionary(pa.int32(), pa.string()), lambda r, p: maybe(r, p, lambda: r.choice(vocab))


def col_chat(keys):
    def make(r):
        pel, pfield = r.choice([0.0, 0.0, 0.1]), r.choice([0.0, 0.0, 0.15])
        roles = ["system", "user", "assistant", "human", "gpt", "tool"]
        t = pa.list_(pa.struct([(keys[0], pa.string()), (keys[1], pa.string())]))
        return t, lambda r, p: maybe(r, p, lambda: rlist(r, lambda: {keys[0]: maybe(r, pfield, lambda: r.choice(roles)),
                                                                       keys[1]: maybe(r, pfield, lambda: text(r, 200))},
                                                         maxn=8, pnull_el=pel))
    return make


def col_large_chat(r):
    t = pa.large_list(pa.struct([("role", pa.string()), ("content", pa.large_string())]))
    return t, lambda r, p: maybe(r, p, lambda: rlist(r, lambda: {"role": "user", "content": text(r)}))


def col_ids(t):
    def make(r):
        lo, hi = r.choice([(0, 50), (0, 150000), (-100, 32000), (-2**31, 2**31 - 1)])
        if t == pa.int64() and r.random() < 0.3: lo, hi = -2**63, 2**63 - 1
        pel = r.choice([0.0, 0.0, 0.05])
        return pa.list_(t), lambda r, p: maybe(r, p, lambda: rlist(r, lambda: r.randint(lo, hi), maxn=r.choice([3, 40, 300]), pnull_el=pel))
    return make


def col_int(t, lo, hi):
    return lambda r: (t, lambda r, p: maybe(r, p, lambda: r.randint(lo, hi)))


def col_float(t):
    def v(r):
        x = r.choice([0.0, -0.0, 1.5, r.uniform(-1e6, 1e6), r.uniform(-1, 1), float("nan"), float("inf"), 1e-310])
        return x
    return lambda r: (t, lambda r, p: maybe(r, p, lambda: v(r)))


def col_bool(r): return pa.bool_(), lambda r, p: maybe(r, p, lambda: r.random() < 0.5)
def col_binary(r): return pa.binary(), lambda r, p: maybe(r, p, lambda: r.choice([b"", b"abc", b"\xff\xfe\x00", bytes(r.randrange(256) for _ in range(r.randint(0, 20)))]))
def col_large_binary(r): return pa.large_binary(), lambda r, p: maybe(r, p, lambda: text(r).encode())
def col_fixed(r): return pa.binary(4), lambda r, p: maybe(r, p, lambda: r.choice([b"abcd", b"\x00\x01\x02\x03", b"\xff\xff\xff\xff"]))


def col_ts(unit, tz=None):
    def v(r):
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=r.randint(-10**9, 4 * 10**9), microseconds=r.randint(0, 999999) if unit in ("us", "ns") else 0)
    return lambda r: (pa.timestamp(unit, tz=tz), lambda r, p: maybe(r, p, lambda: v(r)))


def col_date(r): return pa.date32(), lambda r, p: maybe(r, p, lambda: datetime.date(1970, 1, 1) + datetime.timedelta(days=r.randint(-30000, 30000)))
def col_time(r): return pa.time64("us"), lambda r, p: maybe(r, p, lambda: datetime.time(r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), r.randint(0, 999999)))


def col_decimal(prec, scale):
    def make(r):
        return (pa.decimal128 if prec <= 38 else pa.decimal256)(prec, scale), lambda r, p: maybe(r, p, lambda: decimal.Decimal(r.randint(-10**prec + 1, 10**prec - 1)).scaleb(-scale))
    return make


def col_struct(r):
    t = pa.struct([("a", pa.int32()), ("b", pa.struct([("c", pa.string()), ("d", pa.list_(pa.float64()))]))])
    return t, lambda r, p: maybe(r, p, lambda: {"a": maybe(r, 0.2, lambda: r.randint(-5, 5)),
                                               "b": maybe(r, 0.2, lambda: {"c": maybe(r, 0.2, lambda: text(r, 10)),
                                                                           "d": maybe(r, 0.2, lambda: rlist(r, lambda: r.uniform(-1, 1), pnull_el=0.2))})})


def col_map(r):
    kt, vt = r.choice([(pa.string(), pa.int64()), (pa.int32(), pa.string()), (pa.string(), pa.list_(pa.string()))])
    def key(r): return text(r, 8) + str(r.randrange(10**9)) if kt == pa.string() else r.randrange(-10**6, 10**6)
    def val(r):
        if vt == pa.int64(): return maybe(r, 0.2, lambda: r.randint(-10, 10))
        if vt == pa.string(): return maybe(r, 0.2, lambda: text(r, 10))
        return maybe(r, 0.2, lambda: rlist(r, lambda: text(r, 5)))
    def v(r):
        ks = []
        for _ in range(r.randint(0, 4)):
            k = key(r)
            if k not in ks: ks.append(k)
        return [(k, val(r)) for k in ks]
    return pa.map_(kt, vt), lambda r, p: maybe(r, p, lambda: v(r))


def col_listlist(r): return pa.list_(pa.list_(pa.int32())), lambda r, p: maybe(r, p, lambda: rlist(r, lambda: rlist(r, lambda: r.randint(0, 9), pnull_el=0.1), pnull_el=0.2))
def col_list_str(r): return pa.list_(pa.string()), lambda r, p: maybe(r, p, lambda: rlist(r, lambda: text(r, 20), pnull_el=0.1))
def col_null(r): return pa.null(), lambda r, p: None
def col_f16(r):
    import numpy as np
    return pa.float16(), lambda r, p: maybe(r, p, lambda: np.float16(r.choice([0.5, -2.0, 65504.0, 1e-7, r.uniform(-100, 100)])))
def col_json(r): return pa.json_(), lambda r, p: maybe(r, p, lambda: json.dumps({"k": text(r, 8)}, ensure_ascii=False))
def col_sview(r): return pa.string_view(), lambda r, p: maybe(r, p, lambda: text(r))
def col_bview(r): return pa.binary_view(), lambda r, p: maybe(r, p, lambda: text(r).encode())
def col_time32(r): return pa.time32("ms"), lambda r, p: maybe(r, p, lambda: datetime.time(r.randint(0, 23), r.randint(0, 59), 1, 1000))
def col_dur(r): return pa.duration("us"), lambda r, p: maybe(r, p, lambda: datetime.timedelta(microseconds=r.randint(-10**12, 10**12)))
def col_fsl(r): return pa.list_(pa.float32(), 3), lambda r, p: maybe(r, p, lambda: [r.choice([0.5, None, -1.25]) for _ in range(3)])
def col_uuid(r): return pa.uuid(), lambda r, p: maybe(r, p, lambda: uuid.UUID(int=r.getrandbits(128)).bytes)


def col_tool_chat(r):
    """messages with tool calls: list<struct<role, content, tool_calls: list<struct<name, arguments: map>>>>"""
    call = pa.struct([("name", pa.string()), ("arguments", pa.map_(pa.string(), pa.string()))])
    t = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call))]))
    def msg(r):
        return {"role": r.choice(["user", "assistant", "tool"]), "content": maybe(r, 0.2, lambda: text(r, 40)),
                "tool_calls": maybe(r, 0.5, lambda: rlist(r, lambda: {"name": text(r, 6), "arguments": maybe(r, 0.3, lambda: [("a%d" % i, maybe(r, 0.2, lambda: text(r, 6))) for i in range(r.randint(0, 2))])}, maxn=2, pnull_el=0.1))}
    return t, lambda r, p: maybe(r, p, lambda: rlist(r, lambda: msg(r), maxn=5, pnull_el=0.05))


MAIN = {"text": col_string, "instruction": col_string, "input": col_string, "output": col_string,
        "prompt": col_string, "completion": col_string, "messages": col_chat(("role", "content")),
        "conversations": col_chat(("from", "value")), "input_ids": col_ids(pa.int32()), "labels": col_ids(pa.int64()),
        "chat_large": col_large_chat}
EXTRA = {"i8": col_int(pa.int8(), -128, 127), "i16": col_int(pa.int16(), -2**15, 2**15 - 1),
         "i32": col_int(pa.int32(), -2**31, 2**31 - 1), "i64": col_int(pa.int64(), -2**63, 2**63 - 1),
         "u8": col_int(pa.uint8(), 0, 255), "u32": col_int(pa.uint32(), 0, 2**32 - 1), "u64": col_int(pa.uint64(), 0, 2**64 - 1),
         "f32": col_float(pa.float32()), "f64": col_float(pa.float64()), "flag": col_bool, "blob": col_binary,
         "lblob": col_large_binary, "fixed": col_fixed, "ts_ms": col_ts("ms"), "ts_us": col_ts("us", "UTC"),
         "ts_ns": col_ts("ns"), "ts_s": col_ts("s"), "day": col_date, "tod": col_time, "dec": col_decimal(9, 2),
         "dec18": col_decimal(18, 4), "dec38": col_decimal(38, 10), "meta": col_struct, "attrs": col_map,
         "grid": col_listlist, "tags": col_list_str, "lstr": col_large_string, "source": col_dict_string, "nothing": col_null,
         "half": col_f16, "js": col_json, "sview": col_sview, "bview": col_bview, "t32": col_time32, "dur": col_dur,
         "vec3": col_fsl, "uid": col_uuid, "dec76": col_decimal(60, 5), "tool_msgs": col_tool_chat,
         "weird name.with dot": col_string, "名前 ✓": col_int(pa.int16(), 0, 9)}

CODECS = ["NONE", "SNAPPY", "GZIP", "BROTLI", "ZSTD", "LZ4"]


def make_table(r):
    names = r.sample(sorted(MAIN), r.randint(1, 3)) + (["tool_msgs"] if r.random() < 0.1 else []) + r.sample(sorted(EXTRA), r.randint(0, 6))
    names = list(dict.fromkeys(names))
    r.shuffle(names)  # the chat column need not come first
    n = r.choice([0, 1, 2, 7, 50, 200, 1000, 3000])
    r.long_budget = r.choice([0, 0, 1, 4])
    fields, cols = [], []
    pnull = r.choice([0.0, 0.0, 0.05, 0.3, 1.0])
    for name in names:
        t, gen = (MAIN.get(name) or EXTRA[name])(r)
        nullable = pnull > 0 or r.random() < 0.7 or name == "nothing"
        vals = [gen(r, pnull if nullable else 0.0) for _ in range(n)]
        fields.append(pa.field(name, t, nullable=nullable))
        cols.append(pa.array(vals, type=t))
    meta = {"huggingface": json.dumps({"info": {"features": {n: {"_type": "Value"} for n in names}}, "pad": "x" * r.choice([0, 10, 100000])})} if r.random() < 0.3 else None
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=meta))


def leaf_paths(schema, compliant):
    """Leaf column paths as pyarrow names them in column_encoding, with each leaf's arrow type."""
    out = []
    def walk(prefix, t):
        if pa.types.is_dictionary(t): t = t.value_type
        if pa.types.is_struct(t):
            for f in t: walk(prefix + "." + f.name, f.type)
        elif pa.types.is_map(t):
            walk(prefix + ".key_value.key", t.key_type); walk(prefix + ".key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(prefix + (".list.element" if compliant else ".list.item"), t.value_type)
        else:
            out.append((prefix, t))
    for f in schema: walk(f.name, f.type)
    return out


def pick_encoding(r, t):
    ints = pa.types.is_int32(t) or pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t) \
        or pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t) or pa.types.is_date32(t) \
        or pa.types.is_timestamp(t) or pa.types.is_time64(t)
    strs = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
    opts = ["PLAIN"]
    if ints: opts += ["DELTA_BINARY_PACKED"]
    if strs: opts += ["DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"]
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t): opts += ["DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"]
    if pa.types.is_floating(t) or ints: opts += ["BYTE_STREAM_SPLIT"]
    if pa.types.is_boolean(t): opts += ["RLE"]
    return r.choice(opts)


def write_options(r, table):
    kw = dict(compression=r.choice(CODECS), data_page_version=r.choice(["1.0", "2.0"]),
              write_statistics=r.random() < 0.5, version=r.choice(["1.0", "2.4", "2.6", "2.6"]))
    if r.random() < 0.3: kw["compression"] = {f.name: r.choice(CODECS) for f in table.schema}
    if r.random() < 0.2 and kw["compression"] in ("GZIP", "ZSTD", "BROTLI"):
        kw["compression_level"] = {"GZIP": r.randint(1, 9), "ZSTD": r.randint(-5, 19), "BROTLI": r.randint(0, 11)}[kw["compression"]]
    if r.random() < 0.7: kw["row_group_size"] = r.choice([1, 2, 3, 17, 100, 1000])
    if r.random() < 0.6: kw["data_page_size"] = r.choice([1, 64, 256, 1024, 8192])
    if r.random() < 0.5: kw["write_batch_size"] = r.choice([1, 2, 7, 64, 1024])
    if r.random() < 0.3: kw["dictionary_pagesize_limit"] = r.choice([1, 16, 100, 1000])  # forces PLAIN fallback
    if r.random() < 0.2: kw["write_page_index"] = True
    if r.random() < 0.2: kw["write_page_checksum"] = True
    if r.random() < 0.2: kw["store_schema"] = False
    compliant = r.random() < 0.8
    kw["use_compliant_nested_type"] = compliant
    if r.random() < 0.15 and any(pa.types.is_timestamp(f.type) for f in table.schema):
        kw["use_deprecated_int96_timestamps"] = True
    if r.random() < 0.1: kw["coerce_timestamps"] = r.choice(["ms", "us"]); kw["allow_truncated_timestamps"] = True
    if r.random() < 0.15: kw["max_rows_per_page"] = r.choice([1, 3, 100])
    if r.random() < 0.1: kw["use_content_defined_chunking"] = r.choice([True, {"min_chunk_size": 64, "max_chunk_size": 1024}])
    if r.random() < 0.1: kw["bloom_filter_options"] = {f.name: {"ndv": 64} for f in table.schema if not pa.types.is_nested(f.type)}
    if r.random() < 0.1: kw["store_decimal_as_integer"] = True
    if r.random() < 0.1: kw["sorting_columns"] = [pq.SortingColumn(0, descending=r.random() < 0.5)]
    d = r.random()
    if d < 0.35:
        kw["use_dictionary"] = False
        enc = {}
        for path, t in leaf_paths(table.schema, compliant):
            if r.random() < 0.7: enc[path] = pick_encoding(r, t)
        if enc: kw["column_encoding"] = enc
    elif d < 0.5:
        kw["use_dictionary"] = False
    elif d < 0.6:
        kw["use_dictionary"] = [f.name for f in table.schema if r.random() < 0.5]
    elif d < 0.7:
        kw["use_byte_stream_split"] = True; kw["use_dictionary"] = False
    return kw


# ---- expected rows: pyarrow's, in the reader's JSON conventions (Note [JSON shape]) --------------
def conv(v, t):
    if v is None: return None
    if hasattr(v, "item"): v = v.item()  # numpy scalars (float16)
    if pa.types.is_dictionary(t): return conv(v, t.value_type)
    if pa.types.is_struct(t): return {f.name: conv(v[f.name], f.type) for f in t}
    if pa.types.is_map(t): return {(k if isinstance(k, str) else json.dumps(k)): conv(x, t.item_type) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t): return [conv(x, t.value_type) for x in v]
    if isinstance(v, bytes):
        try: return v.decode()
        except UnicodeDecodeError: return None
    if isinstance(v, float): return v if math.isfinite(v) else None  # JSON has no NaN / inf: both dump null
    if isinstance(v, decimal.Decimal): return float(v)
    if isinstance(v, uuid.UUID): return str(v)
    return v


def raw(a):
    """Temporal columns as the integers the file stores (the reader does not interpret units)."""
    ty = a.type
    if pa.types.is_timestamp(ty) or pa.types.is_date(ty) or pa.types.is_time(ty) or pa.types.is_duration(ty):
        return a.cast(pa.int64() if ty.bit_width == 64 else pa.int32())
    if pa.types.is_dictionary(ty): return raw(a.cast(ty.value_type))
    return a


def expected_rows(path, source):
    """pyarrow's rows, column by column. A column pyarrow cannot read back (its own bugs with some
    nested DELTA_BYTE_ARRAY / dictionary-typed DELTA columns) is taken from the table that was
    written instead, when its type survives the round trip unchanged (no temporal types)."""
    pf = pq.ParquetFile(path)
    out = [dict() for _ in range(pf.metadata.num_rows)]
    fallback = []
    for f in pf.schema_arrow:
        try:
            col = raw(pq.read_table(path, columns=[f.name]).column(f.name))
            if len(col) != len(out): raise OSError("pyarrow read %d of %d rows" % (len(col), len(out)))
        except (pa.ArrowException, OSError) as e:
            try:
                plain = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f])
                col = raw(pq.read_table(path, columns=[f.name], schema=plain).column(f.name))
                if len(col) != len(out): raise OSError("pyarrow read %d of %d rows" % (len(col), len(out)))
            except (pa.ArrowException, OSError):
                src = source.column(f.name)
                if "time" in str(src.type) or "date" in str(src.type) or "duration" in str(src.type): raise
                col = raw(src)
                fallback.append(f.name)
        for i, v in enumerate(col.to_pylist()):
            out[i][f.name] = conv(v, col.type)
    return out, pf.metadata.num_row_groups, fallback


def close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool) or isinstance(b, bool): return False
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return type(a) == type(b) and a == b


def run_ours(exe, paths, timeout):
    """-> {path: ("ok", rows, groups) | ("err", msg) | ("crash"/"timeout", msg)}"""
    try:
        p = subprocess.run([exe] + paths, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    res, cur, rows, groups = {}, None, [], None
    for line in p.stdout.decode("utf-8", "replace").split("\n"):
        if line.startswith("FILE "): cur, rows, groups = line[5:], [], None
        elif line.startswith("ROW "): rows.append(json.loads(line[4:]))
        elif line.startswith("GROUPS "): groups = json.loads(line[7:])
        elif line == "OK": res[cur] = ("ok", rows, groups)
        elif line.startswith("ERR "): res[cur] = ("err", line[4:])
    if p.returncode != 0:
        for path in paths:
            res.setdefault(path, ("crash", "exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace")[-500:])))
    return res


def check(path, got, opts, source):
    try:
        want, ngroups, fallback = expected_rows(path, source)
    except (pa.ArrowException, OSError) as e:  # no oracle for this file (pyarrow cannot read what it wrote)
        return "no-oracle", "pyarrow: %s; ours: %s" % (e, got[0] if got[0] != "err" else got[1])
    if got[0] != "ok": return got[0], got[1]
    rows, groups = got[1], got[2]
    if len(rows) != len(want): return "mismatch", "%d rows, pyarrow %d" % (len(rows), len(want))
    for i, (a, b) in enumerate(zip(rows, want)):
        if not close(a, b):
            for k in b:
                if not close(a.get(k), b[k]):
                    return "mismatch", "row %d column %s: got %s want %s" % (i, k, json.dumps(a.get(k))[:300], json.dumps(b[k])[:300])
            return "mismatch", "row %d keys %s vs %s" % (i, list(a), list(b))
    if groups is None or len(groups) != ngroups or sum(groups) != len(want): return "mismatch", "row groups %s" % groups
    return "ok", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="/tmp/pqbuild")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default="/tmp/pqfuzz_fail")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    exe = build_driver(args.build)
    os.makedirs(args.keep, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pqfuzz_")
    tally, features = {}, {}
    pending = []

    def flush():
        res = run_ours(exe, [p[0] for p in pending], timeout=60 + 20 * len(pending))
        for path, opts, seed, source in pending:
            got = res.get(path) if res else None
            if got is None:  # a hang or a crash mid-batch: run it alone
                one = run_ours(exe, [path], timeout=120)
                got = one.get(path) if one else ("timeout", "")
            outcome, msg = check(path, got, opts, source)
            key = outcome if outcome != "err" else "refused: " + msg.split(": ", 1)[-1][:90]
            tally[key] = tally.get(key, 0) + 1
            if outcome != "ok":
                kept = os.path.join(args.keep, "seed%d.parquet" % seed)
                os.replace(path, kept)
                print("%s seed=%d %s: %s\n   opts=%s" % (outcome.upper(), seed, kept, msg[:400], opts), flush=True)
            else:
                os.remove(path)
        pending.clear()

    for k in range(args.start, args.start + args.n):
        seed = args.seed * 1_000_003 + k
        r = random.Random(seed)
        table = make_table(r)
        opts = write_options(r, table)
        path = os.path.join(work, "f%d.parquet" % seed)
        try:
            pq.write_table(table, path, **opts)
        except (pa.ArrowException, ValueError, TypeError, OSError) as e:  # an option pyarrow itself refuses
            key = "pyarrow refused to write: " + str(e)[:60]
            tally[key] = tally.get(key, 0) + 1
            if os.path.exists(path): os.remove(path)
            continue
        for f in table.schema: features[f.name] = features.get(f.name, 0) + 1
        for key in ("compression", "data_page_version", "version"):
            v = opts.get(key); v = "per-column" if isinstance(v, dict) else v
            features["%s=%s" % (key, v)] = features.get("%s=%s" % (key, v), 0) + 1
        for e in set((opts.get("column_encoding") or {}).values()): features["enc=" + e] = features.get("enc=" + e, 0) + 1
        pending.append((path, opts, seed, table))
        if len(pending) >= args.batch: flush()
    if pending: flush()
    print("outcomes:", json.dumps(tally, indent=1, ensure_ascii=False))
    print("features:", json.dumps(dict(sorted(features.items())), ensure_ascii=False))


if __name__ == "__main__":
    main()
