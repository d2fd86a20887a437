#!/usr/bin/env python3
"""Emits random strings with HF `tokenizers` ids for every fixture tokenizer, plus Python's NFC,
as JSONL on stdout: {"text", "nfc", "ids": {name: [...]}, "decoded": {name: str}}.
Used by tests/data/tokenizer_live_test.cc. Usage: live_check.py SEED COUNT"""
import json
import os
import random
import sys
import unicodedata

try:
    from tokenizers import Tokenizer
except ImportError:
    sys.stderr.write("python3 cannot import 'tokenizers': run tools/install_deps.sh\n")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    toks = {}
    for name in ["llama3", "qwen2", "smollm2", "gpt2", "tekken"]:
        toks[name] = Tokenizer.from_file(os.path.join(ROOT, "tests", "fixtures", "tokenizers", name, "tokenizer.json"))
    out = sys.stdout
    for _ in range(count):
        text = tok_common.random_string(rng)
        rec = {"text": text, "nfc": unicodedata.normalize("NFC", text), "ids": {}, "decoded": {}}
        for name, t in toks.items():
            ids = t.encode(text, add_special_tokens=True).ids
            rec["ids"][name] = ids
            rec["decoded"][name] = t.decode(ids, skip_special_tokens=False)
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
