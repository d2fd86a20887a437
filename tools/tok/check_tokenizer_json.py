#!/usr/bin/env python3
"""Encodes llama.cpp's vocab test texts with HF `tokenizers` loading a given tokenizer.json and
compares with the reference ids: the oracle for tokenizer.json files we write (merge of a GGUF
base, data/detail/tokenizer_export.cc). Prints "ok N" or the first mismatches; exit 1 on any.
Usage: check_tokenizer_json.py TOKENIZER_JSON VOCAB.gguf.inp VOCAB.gguf.out"""
import sys

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    texts = open(sys.argv[2], encoding="utf-8", newline="").read().split("\n__ggml_vocab_test__\n")
    outs = open(sys.argv[3], encoding="utf-8").read().split("\n")
    bad = 0
    n = 0
    for text, want in zip(texts, outs):
        if not text and not want:
            continue
        n += 1
        got = tok.encode(text, add_special_tokens=False).ids
        if got != [int(x) for x in want.split()]:
            bad += 1
            if bad <= 3:
                print("mismatch: %r -> %s, want %s" % (text[:60], got[:12], want.split()[:12]))
    print("ok %d" % n if bad == 0 else "%d of %d differ" % (bad, n))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
