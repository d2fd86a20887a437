#!/usr/bin/env python3
"""Builds small tokenizer.json files that mimic real model pipelines and the ids HF `tokenizers`
gives for a test corpus. Output: tests/fixtures/tokenizers/<name>/{tokenizer.json,expected.jsonl}.
expected.jsonl lines: {"text", "ids" (no special), "ids_special" (add_special_tokens), "decoded",
"decoded_skip"}.

Byte-level: llama3, qwen2, smollm2, gpt2, tekken (trained with the `tokenizers` BPE trainer).
SentencePiece style (spm_common.py): llama2, mistral3, spm_split, spm_unk, all from one tiny
sentencepiece BPE model, and spm_gguf/{tiny_spm.model, tiny_spm.gguf, expected.jsonl} where
expected.jsonl holds sentencepiece's own ids ("ids", "ids_special" with BOS) and decode.
Deterministic: fixed corpus and seeds. Run: python3 tools/tok/make_tokenizer_fixtures.py [names]"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spm_common  # noqa: E402
import tok_common  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NAMES = ["llama3", "qwen2", "smollm2", "gpt2", "tekken"]


def legacy_merges(path):
    """Rewrites merges as "a b" strings (the pre-0.20 form) so both encodings are tested."""
    j = json.load(open(path, encoding="utf-8"))
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)


def fixture_dir(name):
    out = os.path.join(ROOT, "tests", "fixtures", "tokenizers", name)
    os.makedirs(out, exist_ok=True)
    return out


def write_expected(out, tok, texts):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))  # test what was written
    with open(os.path.join(out, "expected.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            rec = {"text": t, "ids": ids, "ids_special": tok.encode(t, add_special_tokens=True).ids,
                   "decoded": tok.decode(ids, skip_special_tokens=False),
                   "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(os.path.basename(out), tok.get_vocab_size(), "tokens,", len(texts), "texts ->", out)


def byte_level(name, texts):
    out = fixture_dir(name)
    path = os.path.join(out, "tokenizer.json")
    tok_common.build(name).save(path, pretty=False)
    if name == "gpt2":
        legacy_merges(path)
    write_expected(out, None, texts)


def spm_fixtures(names, texts):
    model = spm_common.train_model()
    for name in names:
        out = fixture_dir(name)
        with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(spm_common.tokenizer_json(name, model), f, ensure_ascii=False, separators=(",", ":"))
        write_expected(out, None, texts)
    out = fixture_dir("spm_gguf")
    with open(os.path.join(out, "tiny_spm.model"), "wb") as f:
        f.write(model)
    spm_common.write_gguf(os.path.join(out, "tiny_spm.gguf"), model)
    sp = spm_common.processor(model)
    with open(os.path.join(out, "expected.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = spm_common.sp_encode(sp, t)
            f.write(json.dumps({"text": t, "ids": ids, "ids_special": [sp.bos_id()] + ids, "decoded_skip": sp.decode(ids)},
                               ensure_ascii=False) + "\n")
    print("spm_gguf", sp.get_piece_size(), "pieces,", len(texts), "texts ->", out)


def main():
    names = sys.argv[1:] or NAMES + spm_common.SPM_NAMES
    texts = tok_common.test_texts()
    for name in names:
        if name in NAMES:
            byte_level(name, texts)
    spm = [n for n in names if n in spm_common.SPM_NAMES]
    if spm:  # fewer random strings: the live test covers more on every run, and the repo stays small
        spm_fixtures(spm, tok_common.test_texts(n=120))


if __name__ == "__main__":
    main()
