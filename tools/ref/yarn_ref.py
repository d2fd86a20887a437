#!/usr/bin/env python3
"""Reference yarn RoPE parameters from transformers itself (tests/fixtures/rope/yarn_ref.json).

Runs transformers' own _compute_yarn_parameters -- the function HF models call -- on configs
built by transformers' config classes. torch is not needed: the function's few tensor ops
(arange, float32 casts, pow, clamp, arithmetic) run on a numpy float32 stand-in, which follows
torch's float32 type rules for python scalars meeting float32 arrays (NumPy >= 2, NEP 50).
    python3 tools/ref/yarn_ref.py > tests/fixtures/rope/yarn_ref.json
"""
import copy
import json
import sys
import types

import numpy as np
import transformers
import transformers.modeling_rope_utils as rope


class T(np.ndarray):
    def to(self, device=None, dtype=None):
        return self.astype(dtype).view(T) if dtype is not None else self


def arange(*args, dtype=None, device=None):
    a = np.arange(*args, dtype=dtype if dtype is not None else np.int64)
    return a.view(T)


shim = types.SimpleNamespace(arange=arange, clamp=lambda x, lo, hi: np.clip(x, lo, hi).astype(np.float32).view(T),
                             float=np.float32, float32=np.float32, int64=np.int64, device=object)
rope.torch = shim

CASES = [
    # name, config dict (HF config.json keys)
    ("qwen2.5_yarn4_v4", {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
                          "max_position_embeddings": 32768, "rope_theta": 1000000.0,
                          "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}),
    ("qwen3_yarn4_v5", {"model_type": "qwen3", "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
                        "max_position_embeddings": 40960,
                        "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                            "original_max_position_embeddings": 32768}}),
    ("llama_d64_betas_notrunc", {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
                                 "max_position_embeddings": 4096, "rope_theta": 10000.0,
                                 "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 16,
                                                  "beta_slow": 2, "truncate": False,
                                                  "original_max_position_embeddings": 4096}}),
    ("llama_mscale", {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8,
                      "max_position_embeddings": 16384, "rope_theta": 500000.0,
                      "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "mscale": 0.707, "mscale_all_dim": 1.0,
                                       "original_max_position_embeddings": 1024}}),
    ("mistral_factor_from_lengths", {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                                     "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                                     "rope_scaling": {"rope_type": "yarn", "factor": None,
                                                      "original_max_position_embeddings": 32768}}),
    ("qwen2_attention_factor", {"model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14,
                                "max_position_embeddings": 32768, "rope_theta": 1000000.0,
                                "rope_scaling": {"type": "yarn", "factor": 2.0, "attention_factor": 1.25,
                                                 "original_max_position_embeddings": 32768}}),
]


def main():
    out = {"transformers": transformers.__version__, "numpy": np.__version__, "cases": []}
    for name, cfg in CASES:
        c = transformers.AutoConfig.for_model(**copy.deepcopy(cfg))
        inv, attn = rope._compute_yarn_parameters(c, None)
        inv = np.asarray(inv, dtype=np.float32)
        out["cases"].append({"name": name, "config": cfg, "attention_factor": float(attn),
                             "inv_freq_bits": [int(b) for b in inv.view(np.uint32)]})
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
