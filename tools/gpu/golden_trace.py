#!/usr/bin/env python3
"""Runs `streamtune train` on a golden fixture (tests/fixtures/<name>) and compares its per-step
losses and grad norms with the HF+PEFT trace (trace.json). Used on the GPU machine to show the
CUDA backend reproduces the CPU-verified goldens within dtype tolerance.

usage: golden_trace.py BIN FIXTURE_DIR WORKDIR DEVICE DTYPE  -> prints one JSON line, exit 1 on failure
"""
import json, os, subprocess, sys

bin_, fx, work, device, dtype = sys.argv[1:6]
fx = os.path.abspath(fx)
work = os.path.abspath(work)
trace = json.load(open(os.path.join(fx, "trace.json")))
c = trace["config"]
os.makedirs(work, exist_ok=True)
out = os.path.join(work, "out")
cfg = {
    "base_model": os.path.join(fx, "model"),
    "datasets": [{"path": os.path.join(fx, "data.jsonl"), "type": "tokenized"}],
    "lora_model_dir": os.path.join(fx, "adapter"),
    "dtype": dtype, "device": device, "stream": "ram", "sequence_len": 64,
    "loss_normalization": "micro_batch", "output_dir": out, "cache_dir": os.path.join(work, "cache"),
}
for k in ["learning_rate", "lr_scheduler", "warmup_steps", "weight_decay", "adam_beta1", "adam_beta2",
          "adam_epsilon", "max_grad_norm", "micro_batch_size", "gradient_accumulation_steps", "max_steps",
          "shuffle", "lora_r", "lora_alpha", "lora_dropout"]:
    cfg[k] = c[k]
cfg["lora_target_modules"] = c["lora_target_modules"]
if c.get("use_dora"):
    cfg["use_dora"] = True
if c.get("layers_to_transform"):
    cfg["peft_layers_to_transform"] = [str(l) for l in c["layers_to_transform"]]
if c.get("loraplus_lr_ratio"):
    cfg["loraplus_lr_ratio"] = c["loraplus_lr_ratio"]
# GOLDEN_DROPOUT=p overrides lora_dropout (1e-9: the dropout code paths with every element kept).
if os.environ.get("GOLDEN_DROPOUT"):
    cfg["lora_dropout"] = float(os.environ["GOLDEN_DROPOUT"])
path = os.path.join(work, "cfg.yaml")
with open(path, "w") as f:
    for k, v in cfg.items():
        if k == "datasets":
            f.write("datasets:\n  - path: %s\n    type: tokenized\n" % v[0]["path"])
        elif isinstance(v, list):
            f.write("%s: [%s]\n" % (k, ", ".join(v)))
        elif isinstance(v, bool):
            f.write("%s: %s\n" % (k, "true" if v else "false"))
        else:
            f.write("%s: %s\n" % (k, v))
r = subprocess.run([bin_, "train", path], capture_output=True, text=True)
if r.returncode != 0:
    print(json.dumps({"fixture": os.path.basename(fx), "device": device, "dtype": dtype, "error": r.stderr[-800:]}))
    sys.exit(1)
ours = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
ref = trace["steps"]
loss_err = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(ours, ref))
gn_err = max(abs(a["grad_norm"] - b["grad_norm"]) / abs(b["grad_norm"]) for a, b in zip(ours, ref))
tol = 1e-4 if dtype == "float32" else 2e-2
ok = len(ours) == len(ref) and loss_err <= tol
print(json.dumps({"fixture": os.path.basename(fx), "device": device, "dtype": dtype, "steps": len(ours),
                  "max_rel_loss_err": loss_err, "max_rel_grad_norm_err": gn_err, "tol": tol, "ok": ok}))
sys.exit(0 if ok else 1)
