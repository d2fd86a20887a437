#!/usr/bin/env python3
"""Compares our dequantisation of real GGUF tensors with gguf-py's (llama.cpp's numpy reference).

Usage: compare_dequant_real.py FILE.gguf GGUF_DUMP_TOOL
Checks the embedding, the final norm, layer 0's q/k/v, an o_proj and a gate_proj from the middle
layer and a down_proj from the last layer, and then, for every ggml type in the file that none of
those has (a *.Q5_K_M.gguf holds Q5_K and Q6_K, a *.Q3_K_M.gguf Q3_K, Q4_K, Q5_K and Q6_K, ...),
the first tensor of that type. For each, gguf_dump writes our HF-order f32; the reference is
gguf.quants.dequantize of the raw blocks, reshaped to the HF shape and, for q/k of arch llama,
un-permuted the way convert_hf_to_gguf.py permuted them (reshape/swapaxes, independent of our
row formula). Exit status 1 if any element's bits differ (NaN payloads aside): every supported
type is exact (tests/io/gguf_dequant_test.cc says why FMA cannot change the result).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import quants

# GGUF tensor-name suffix inside blk.N -> HF name suffix inside model.layers.N.
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def hf_name(gname):
    if gname in TOP_NAMES:
        return TOP_NAMES[gname]
    parts = gname.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}"
    return None


def pick_tensors(tensors, n_layers):
    """GGUF names to check: a fixed spread over the model, then one tensor of each uncovered type."""
    mid, last = n_layers // 2, n_layers - 1
    wanted = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
              f"blk.{mid}.attn_output.weight", f"blk.{last}.ffn_down.weight", f"blk.{mid}.ffn_gate.weight",
              "blk.0.attn_norm.weight", "output_norm.weight"]
    names = [n for n in wanted if n in tensors]
    covered = {tensors[n].tensor_type for n in names}
    for n, t in tensors.items():
        if t.tensor_type not in covered and hf_name(n) is not None:
            names.append(n)
            covered.add(t.tensor_type)
    return names


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
    n_layers = field(r, f"{arch}.block_count")
    tensors = {t.name: t for t in r.tensors}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for gname in pick_tensors(tensors, n_layers):
            t = tensors[gname]
            hname = hf_name(gname)
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
            ulps[np.isnan(got) & np.isnan(ref)] = 0
            exact = float((ulps == 0).mean())
            worst = int(ulps.max())
            status = "ok" if worst == 0 else "MISMATCH"
            bad += worst > 0
            print(f"{gname:28s} {t.tensor_type.name:6s} {str(hf_shape):14s} bit-exact {exact*100:6.2f}%  "
                  f"max ulp {worst}  {status}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
