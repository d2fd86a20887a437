#!/usr/bin/env python3
"""Does a merge of a GGUF base load in transformers? (device check; needs torch + transformers)
DIR/merged: `streamtune merge --model tiny_llama.gguf --adapter ... --dtype float32` (HF dir with
tokenizer files written from the GGUF vocabulary); DIR/ours_merged.safetensors and
DIR/ours_base_adapter.safetensors: `streamtune logits` (f32) of DIR/rows.jsonl on the merged dir and
on the GGUF base + adapter; DIR/smol_tok: the tokenizer files the merge wrote for SmolLM2's Q4_1
GGUF, DIR/smol_ids.json: our GGUF tokenizer's ids for some texts.
Checks: transformers' logits of the merged dir match ours (and base + adapter); AutoTokenizer loads
both tokenizer dirs, encodes as our GGUF tokenizer does, and applies the GGUF's chat template.
Usage: gguf_merge_hf_check.py DIR"""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def main():
    d = sys.argv[1]
    ok = True
    rows = [json.loads(line) for line in open(d + "/rows.jsonl")]
    model = AutoModelForCausalLM.from_pretrained(d + "/merged", torch_dtype=torch.float32)
    model.eval()
    ours = load_file(d + "/ours_merged.safetensors")
    base_ad = load_file(d + "/ours_base_adapter.safetensors")
    for i, ids in enumerate(rows):
        ids = ids["input_ids"] if isinstance(ids, dict) else ids
        with torch.no_grad():
            hf = model(torch.tensor([ids])).logits[0]
        r1, r2 = rel(hf, ours["logits_%d" % i]), rel(hf, base_ad["logits_%d" % i])
        print("row %d: transformers vs ours (merged) %.2e, vs ours (base + adapter) %.2e" % (i, r1, r2))
        ok = ok and r1 < 1e-5 and r2 < 1e-4
    tiny = AutoTokenizer.from_pretrained(d + "/merged")
    print("tiny tokenizer:", type(tiny).__name__, len(tiny))
    tok = AutoTokenizer.from_pretrained(d + "/smol_tok")
    for rec in json.load(open(d + "/smol_ids.json")):
        got = tok(rec["text"], add_special_tokens=False)["input_ids"]
        same = got == rec["ids"]
        ok = ok and same
        print("smol %-40r %s" % (rec["text"][:40], "same ids" if same else "DIFFERS %s vs %s" % (got[:10], rec["ids"][:10])))
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   add_generation_prompt=True, tokenize=False)
    print("chat template renders:", repr(chat))
    ok = ok and chat.endswith("<|im_start|>assistant\n")
    print("ALL OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
