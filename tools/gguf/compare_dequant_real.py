#!/usr/bin/env python3
"""Compares our dequantisation of real GGUF tensors with gguf-py's (llama.cpp's numpy reference).

Usage: compare_dequant_real.py FILE.gguf GGUF_DUMP_TOOL
For each tensor below, gguf_dump writes our HF-order f32; the reference is gguf.quants.dequantize
of the raw blocks, reshaped to the HF shape and, for q/k of arch llama, un-permuted the way
convert_hf_to_gguf.py permuted them (reshape/swapaxes, independent of our row formula).
Exit status 1 if any element differs by more than 1 ulp.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import quants

NAMES = [
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"),
    ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"),
    ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"),
    ("blk.17.attn_output.weight", "model.layers.17.self_attn.o_proj.weight"),
    ("blk.29.ffn_down.weight", "model.layers.29.mlp.down_proj.weight"),
    ("blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight"),
    ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
    ("output_norm.weight", "model.norm.weight"),
]


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def field(r, key):
    return r.fields[key].contents()


def main():
    path, tool = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    n_head = field(r, f"{arch}.attention.head_count")
    n_kv = field(r, f"{arch}.attention.head_count_kv")
    tensors = {t.name: t for t in r.tensors}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for gname, hname in NAMES:
            t = tensors[gname]
            hf_shape = tuple(int(x) for x in reversed(t.shape))
            ref = quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(hf_shape)
            if arch == "llama" and gname.endswith(("attn_q.weight", "attn_q.bias")):
                ref = unpermute(ref, n_head)
            if arch == "llama" and gname.endswith(("attn_k.weight", "attn_k.bias")):
                ref = unpermute(ref, n_kv)
            out = os.path.join(tmp, "t.f32")
            subprocess.run([tool, "tensor", path, hname, out], check=True)
            got = np.fromfile(out, dtype="<f4").reshape(hf_shape)
            ulps = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
            exact = float((ulps == 0).mean())
            worst = int(ulps.max())
            status = "ok" if worst <= 1 else "MISMATCH"
            bad += worst > 1
            print(f"{gname:28s} {t.tensor_type.name:5s} {str(hf_shape):14s} bit-exact {exact*100:6.2f}%  "
                  f"max ulp {worst}  {status}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
