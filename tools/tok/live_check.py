#!/usr/bin/env python3
"""Emits random strings with HF `tokenizers` ids for every fixture tokenizer, plus Python's NFC,
as JSONL on stdout: {"text", "nfc", "ids": {name: [...]}, "decoded": {name: str}}.
"spm_gguf" is sentencepiece itself on the model behind tests/fixtures/tokenizers/spm_gguf (BOS +
ids; "decoded" = sentencepiece's decode, which drops control tokens).
Used by tests/data/tokenizer_live_test.cc. Usage: live_check.py SEED COUNT"""
import json
import os
import random
import sys
import unicodedata

try:
    import sentencepiece  # noqa: F401
    from tokenizers import Tokenizer
except ImportError as e:
    sys.stderr.write("python3 cannot import '%s': run tools/install_deps.sh\n" % e.name)
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spm_common  # noqa: E402
import tok_common  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    toks = {}
    fixtures = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
    for name in ["llama3", "qwen2", "smollm2", "gpt2", "tekken"] + spm_common.SPM_NAMES:
        toks[name] = Tokenizer.from_file(os.path.join(fixtures, name, "tokenizer.json"))
    with open(os.path.join(fixtures, "spm_gguf", "tiny_spm.model"), "rb") as f:
        sp = spm_common.processor(f.read())
    out = sys.stdout
    for _ in range(count):
        text = tok_common.random_string(rng)
        rec = {"text": text, "nfc": unicodedata.normalize("NFC", text), "ids": {}, "decoded": {}}
        for name, t in toks.items():
            ids = t.encode(text, add_special_tokens=True).ids
            rec["ids"][name] = ids
            rec["decoded"][name] = t.decode(ids, skip_special_tokens=False)
        ids = spm_common.sp_encode(sp, text)
        rec["ids"]["spm_gguf"] = [sp.bos_id()] + ids
        rec["decoded"]["spm_gguf"] = sp.decode(ids)
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
