#!/usr/bin/env python3
"""Fixtures for the CSV / TSV dataset reader (io/csv.h), their records as Hugging Face `datasets`
reads them: run where `datasets` is installed (`make test` does not need it).

  python3 tools/ref/make_csv_fixture.py OUT_DIR      # OUT_DIR: tests/fixtures/csv

For each case NAME.csv / NAME.tsv it writes NAME.expected.jsonl: one JSON object a record, what
load_dataset("csv", data_files=..., delimiter=...) gives with every column a string and only
empty fields missing (keep_default_na=False, na_values=[""]: io/csv.h keeps "NA", "None", ...
as text, where pandas' defaults would make them missing too).
"""
import json
import os
import sys

import datasets

CASES = {
    # Stanford Alpaca as a spreadsheet exports it: quoted commas, doubled quotes, a multi-line
    # answer with CRLF inside its quotes, an empty input, non-ASCII text, no final newline.
    "alpaca.csv": (
        'instruction,input,output\n'
        '"Add the numbers, please","1, 2",3\n'
        'Say hi,,"He said ""hi"", twice"\n'
        '"Write two lines",,"first line\r\nsecond line"\n'
        'Translate,café,"naïve — 日本語 🙂"'
    ).encode(),
    # CRLF records, empty and whitespace-only lines, a header with an empty name, a repeated name
    # and a trailing delimiter, NA spellings kept as text.
    "header.csv": (
        'a,b,a,,a\r\n'
        '1,2,3,4,5\r\n'
        '\r\n'
        '   \r\n'
        'NA,None,null,nan,""\r\n'
        '\t\r\n'
        'x,y,z,w,v\r\n'
    ).encode(),
    # Lone CR line ends (classic Mac), short rows (missing fields), a quote inside an unquoted
    # field, text after a closing quote, a quoted field spanning a CR.
    "short.csv": (
        'text,extra\r'
        'only\r'
        'say "hi" now,1\r'
        '"quoted" tail,2\r'
        '"over\rtwo",\r'
    ).encode(),
    # Tab-separated: commas are text, a quoted tab, an empty row of two fields (a lone tab is the
    # delimiter, not a blank line), leading and trailing spaces kept.
    "tabs.tsv": (
        'prompt\tcompletion\n'
        'a, b\tc, d\n'
        '"tab\there"\t x \n'
        '\t\n'
        '  \n'
        'last\trow\n'
    ).encode(),
    # A UTF-8 byte-order mark before the header (Excel's "CSV UTF-8").
    "bom.csv": b'\xef\xbb\xbftext\nhello\n"world"\n',
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in CASES.items():
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(data)
        delim = "\t" if name.endswith(".tsv") else ","
        header = datasets.load_dataset("csv", data_files=path, split="train", delimiter=delim,
                                       keep_default_na=False, na_values=[""]).column_names
        feats = datasets.Features({c: datasets.Value("string") for c in header})
        ds = datasets.load_dataset("csv", data_files=path, split="train", delimiter=delim,
                                   keep_default_na=False, na_values=[""], features=feats)
        stem = name.rsplit(".", 1)[0]
        with open(os.path.join(out, stem + ".expected.jsonl"), "w", encoding="utf-8") as f:
            for r in ds:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(name, len(ds), "records", header)


if __name__ == "__main__":
    main()
