#!/usr/bin/env python3
"""The peer benchmark (../shared/bench/peft_bench.py, copied to .peer/ for the device) with another
LoRA configuration: PEFT_TARGETS (comma list, default q_proj,v_proj), PEFT_DORA=1 (use_dora) and
PEFT_DROPOUT=p (lora_dropout).
Everything else -- models, timing, output -- is the peer script's own.

usage: PEFT_DORA=1 PEFT_TARGETS=q_proj,v_proj python3 tools/gpu/peft_variant.py NAME:SEQ[:BATCH] ...
"""
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
peer = os.environ.get("PEER", os.path.join(here, "..", "..", ".peer", "peft_bench.py"))
sys.path.insert(0, os.path.dirname(peer))
import peft  # noqa: E402

targets = os.environ.get("PEFT_TARGETS", "q_proj,v_proj").split(",")
dora = os.environ.get("PEFT_DORA", "0") == "1"
dropout = float(os.environ.get("PEFT_DROPOUT", "0"))
_orig = peft.LoraConfig


def _config(**kw):
    kw["target_modules"] = targets
    kw["use_dora"] = dora
    kw["lora_dropout"] = dropout
    return _orig(**kw)


peft.LoraConfig = _config  # the peer script does `from peft import LoraConfig` when it runs
runpy.run_path(peer, run_name="__main__")
