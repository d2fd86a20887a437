#!/usr/bin/env python3
"""Builds small tokenizer.json files that mimic real model pipelines and the ids HF `tokenizers`
gives for a test corpus. Output: tests/fixtures/tokenizers/<name>/{tokenizer.json,expected.jsonl}.
expected.jsonl lines: {"text", "ids" (no special), "ids_special" (add_special_tokens), "decoded"}.
Deterministic: fixed corpus and seeds. Run: python3 tools/tok/make_tokenizer_fixtures.py"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NAMES = ["llama3", "qwen2", "smollm2", "gpt2", "tekken"]


def legacy_merges(path):
    """Rewrites merges as "a b" strings (the pre-0.20 form) so both encodings are tested."""
    j = json.load(open(path, encoding="utf-8"))
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)


def main():
    texts = tok_common.test_texts()
    for name in NAMES:
        out = os.path.join(ROOT, "tests", "fixtures", "tokenizers", name)
        os.makedirs(out, exist_ok=True)
        tok = tok_common.build(name)
        path = os.path.join(out, "tokenizer.json")
        tok.save(path, pretty=False)
        if name == "gpt2":
            legacy_merges(path)
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(path)  # test what was written
        with open(os.path.join(out, "expected.jsonl"), "w", encoding="utf-8") as f:
            for t in texts:
                ids = tok.encode(t, add_special_tokens=False).ids
                rec = {"text": t, "ids": ids, "ids_special": tok.encode(t, add_special_tokens=True).ids,
                       "decoded": tok.decode(ids, skip_special_tokens=False),
                       "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        print(name, tok.get_vocab_size(), "tokens,", len(texts), "texts ->", out)


if __name__ == "__main__":
    main()
