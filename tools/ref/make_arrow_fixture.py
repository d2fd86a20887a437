#!/usr/bin/env python3
"""Fixtures for the Arrow IPC reader (io/arrow.h), written by pyarrow and `datasets` themselves:
run where both are installed (`make test` does not need them).

  python3 tools/ref/make_arrow_fixture.py OUT_DIR      # OUT_DIR: tests/fixtures/arrow

OUT_DIR/
  saved/           Dataset.save_to_disk of alpaca-style records with a messages list and nulls
  saved_dict/      DatasetDict.save_to_disk: train/ and test/ splits, dataset_dict.json
  types.arrow      a pyarrow stream of two batches with every type io/arrow.h reads
  types_file.arrow the same table in the file format ("ARROW1" ... footer)
  *.expected.jsonl what io/arrow.h must give for each: the rows as JSON, by its rules (Note
                   [Arrow IPC]: dates and timestamps as their integer, decimals and non-UTF-8
                   binary as null, NaN as null, maps as objects)
"""
import datetime
import decimal
import json
import math
import os
import sys

import datasets
import pyarrow as pa

RECORDS = [
    {"instruction": "Add the numbers", "input": "1, 2", "output": "3", "id": 1, "score": 0.5, "ok": True,
     "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    {"instruction": "Say hi", "input": None, "output": "He said \"hi\"\nnaïve — 日本語 🙂", "id": 2, "score": None,
     "ok": False, "messages": []},
    {"instruction": "Third", "input": "", "output": "x", "id": None, "score": -1.25, "ok": None, "messages": None},
]


def types_table():
    schema = pa.schema([
        ("i8", pa.int8()), ("u64", pa.uint64()), ("f16", pa.float16()), ("f32", pa.float32()), ("f64", pa.float64()),
        ("b", pa.bool_()), ("s", pa.string()), ("ls", pa.large_string()), ("bin", pa.binary()),
        ("lbin", pa.large_binary()), ("fbin", pa.binary(2)), ("ll", pa.list_(pa.list_(pa.int32()))),
        ("large", pa.large_list(pa.string())), ("fixed", pa.list_(pa.int16(), 2)),
        ("st", pa.struct([("a", pa.int64()), ("t", pa.struct([("x", pa.string())]))])),
        ("m", pa.map_(pa.string(), pa.int32())), ("n", pa.null()), ("d", pa.date32()),
        ("ts", pa.timestamp("ms")), ("dec", pa.decimal128(5, 2)),
    ])
    rows = [
        dict(i8=-5, u64=2**64 - 1, f16=1.5, f32=0.25, f64=math.nan, b=True, s="text", ls="large text", bin=b"ok",
             lbin=b"\xff\xfe", fbin=b"ab", ll=[[1, 2], [], None, [3]], large=["x", None], fixed=[7, 8],
             st={"a": 1, "t": {"x": "in"}}, m=[("k", 1), ("j", 2)], n=None, d=datetime.date(1970, 1, 11),
             ts=datetime.datetime(1970, 1, 1, 0, 0, 1), dec=decimal.Decimal("1.25")),
        dict(i8=None, u64=0, f16=None, f32=math.inf, f64=-2.5, b=None, s=None, ls="", bin=None, lbin=b"",
             fbin=None, ll=None, large=[], fixed=None, st=None, m=None, n=None, d=None, ts=None, dec=None),
        dict(i8=127, u64=3, f16=-0.0, f32=-1.0, f64=1e300, b=False, s="日本", ls="🙂", bin=b"\xc0\xaf",
             lbin=b"fine", fbin=b"\x00\x01", ll=[[None]], large=None, fixed=[None, 1], st={"a": None, "t": None},
             m=[], n=None, d=datetime.date(1969, 12, 31), ts=datetime.datetime(1969, 12, 31, 23, 59, 59),
             dec=decimal.Decimal("-3.00")),
    ]
    return pa.Table.from_pylist(rows, schema=schema)


def expect(v, t):
    """A pyarrow value (to_pylist form) as io/arrow.h gives it."""
    if v is None:
        return None
    if pa.types.is_floating(t):
        return v if math.isfinite(v) else None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if pa.types.is_map(t):
        return {k: expect(x, t.item_type) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [expect(x, t.value_type) for x in v]
    if pa.types.is_struct(t):
        return {t.field(i).name: expect(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_date32(t):
        return (v - datetime.date(1970, 1, 1)).days
    if pa.types.is_timestamp(t):
        return int((v - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
    if pa.types.is_decimal(t):
        return None
    return v


def write_expected(table, path):
    with open(path, "w", encoding="utf-8") as f:
        for row in table.to_pylist():
            out = {fld.name: expect(row[fld.name], fld.type) for fld in table.schema}
            f.write(json.dumps(out, ensure_ascii=False) + "\n")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    ds = datasets.Dataset.from_list(RECORDS)
    ds.save_to_disk(os.path.join(out, "saved"))
    write_expected(ds.data.table, os.path.join(out, "saved.expected.jsonl"))
    datasets.DatasetDict({"train": ds.select([0, 1]), "test": ds.select([2])}).save_to_disk(os.path.join(out, "saved_dict"))
    t = types_table()
    with pa.ipc.new_stream(os.path.join(out, "types.arrow"), t.schema) as w:
        for b in t.to_batches(max_chunksize=2):
            w.write_batch(b)
    with pa.ipc.new_file(os.path.join(out, "types_file.arrow"), t.schema) as w:
        w.write_table(t)
    write_expected(t, os.path.join(out, "types.expected.jsonl"))
    print("written to", out)


if __name__ == "__main__":
    main()
