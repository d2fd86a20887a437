#!/usr/bin/env python3
"""Fixtures for the PyTorch checkpoint reader (io/torch_zip.h), written by torch itself: run where
torch and transformers are installed (the H200 machine has them; `make test` does not need them).

  python3 tools/ref/make_torch_bin_fixture.py OUT_DIR

OUT_DIR/
  llama_st/      a tiny random Llama (bf16) as save_pretrained writes it: config.json + model.safetensors
  llama_bin/     the same weights as torch.save(state_dict): pytorch_model-0000{1,2}-of-00002.bin +
                 pytorch_model.bin.index.json (the layout transformers wrote before safetensors)
  qwen_bin/      a tiny Qwen2 (f16, tied embeddings, biases) as one pytorch_model.bin
  qwen_st/       the same as safetensors
  views.bin      torch.save({...}) of tensors sharing one storage, an offset view, a transposed
                 (non-contiguous) one, f32 / bf16 / f16 / int64, a 0-d tensor, a Parameter
  views.safetensors  what each of them holds, contiguous (the oracle)
  legacy.bin     torch.save(..., _use_new_zipfile_serialization=False): the pre-1.6 format
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM


def tiny(cls, cfg_cls, dtype, **kw):
    torch.manual_seed(0)
    cfg = cfg_cls(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=512, max_position_embeddings=256, **kw)
    m = cls(cfg).to(dtype)
    with torch.no_grad():  # norms away from 1 so a swapped tensor shows
        for n, p in m.named_parameters():
            if "norm" in n:
                p.uniform_(0.5, 1.5)
    return m


def save_bin(model, out, shards):
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)  # as transformers saved tied checkpoints
    if shards == 1:
        torch.save(sd, os.path.join(out, "pytorch_model.bin"))
        return
    names = list(sd)
    half = len(names) // 2
    wm = {}
    for i, part in enumerate((names[:half], names[half:])):
        fname = f"pytorch_model-{i + 1:05d}-of-00002.bin"
        torch.save({k: sd[k] for k in part}, os.path.join(out, fname))
        wm.update({k: fname for k in part})
    total = sum(v.numel() * v.element_size() for v in sd.values())
    with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    llama = tiny(LlamaForCausalLM, LlamaConfig, torch.bfloat16)
    llama.save_pretrained(os.path.join(out, "llama_st"))
    save_bin(llama, os.path.join(out, "llama_bin"), 2)
    qwen = tiny(Qwen2ForCausalLM, Qwen2Config, torch.float16, tie_word_embeddings=True)
    qwen.save_pretrained(os.path.join(out, "qwen_st"))
    save_bin(qwen, os.path.join(out, "qwen_bin"), 1)

    torch.manual_seed(1)
    base = torch.randn(6, 8)
    views = {
        "whole": base,
        "rows": base[2:5],                       # shares base's storage at an offset
        "col_major": base.t(),                   # non-contiguous
        "bf16": torch.randn(3, 5).to(torch.bfloat16),
        "f16": torch.randn(7).to(torch.float16),
        "i64": torch.arange(10, dtype=torch.int64),
        "scalar": torch.tensor(3.5),
        "param": torch.nn.Parameter(torch.randn(2, 3)),
    }
    torch.save(views, os.path.join(out, "views.bin"))
    save_file({k: v.detach().contiguous().clone() for k, v in views.items()}, os.path.join(out, "views.safetensors"))
    torch.save({"w": torch.randn(2, 2)}, os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)
    print("wrote", out, "torch", torch.__version__)


if __name__ == "__main__":
    main()
