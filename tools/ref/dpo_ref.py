#!/usr/bin/env python3
"""DPO (sigmoid loss) in PyTorch + PEFT, as the reference for `streamtune train` with rl: dpo.

Trains the same LoRA adapter the same number of steps on the same pairs, in the same order, with
the textbook DPO loss written here with autograd -- policy: the PEFT model, reference: the same
model under `disable_adapter()` (what TRL uses for a PEFT model without ref_model) -- and AdamW
(torch's) with global grad-norm clipping, then compares its adapter with streamtune's.

usage: dpo_ref.py MODEL_DIR INIT_ADAPTER PAIRS_JSONL STREAMTUNE_OUT --beta B --lr LR --steps N
                  --pairs-per-step P [--max-grad-norm 1.0] [--tol 2e-3]
PAIRS_JSONL records: {"messages": [{"role": "user", "content": q}], "chosen": {"content": a},
"rejected": {"content": b}} rendered as ChatML (the config's chat_template: chatml); the reply's
tokens and its <|im_end|> are trained. Prints one JSON line; exit 1 when an adapter tensor differs by
more than --tol (max |d| / max |ref|).
"""
import argparse, json, math, sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

ap = argparse.ArgumentParser()
ap.add_argument("model"); ap.add_argument("init_adapter"); ap.add_argument("pairs"); ap.add_argument("st_out")
ap.add_argument("--beta", type=float, required=True); ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--steps", type=int, required=True); ap.add_argument("--pairs-per-step", type=int, required=True)
ap.add_argument("--max-grad-norm", type=float, default=1.0); ap.add_argument("--tol", type=float, default=2e-3)
a = ap.parse_args()

torch.manual_seed(0)
tok = PreTrainedTokenizerFast(tokenizer_file=f"{a.model}/tokenizer.json")
base = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32, attn_implementation="eager")
model = PeftModel.from_pretrained(base, a.init_adapter, is_trainable=True)
model.train()  # LoRA dropout is 0 in the configs this compares

def encode(rec, key):
    q = rec["messages"][0]["content"]
    prompt = f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
    reply = rec[key]["content"] if isinstance(rec[key], dict) else rec[key]
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    ids = tok(prompt + reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert ids[: len(p)] == p, "the prompt's tokens are not a prefix"
    return ids, len(p)

def logp_sum(ids, start):
    x = torch.tensor([ids])
    logits = model(input_ids=x).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    tgt = torch.tensor(ids[start:])
    return lp[start - 1 : len(ids) - 1].gather(1, tgt[:, None]).sum()

recs = [json.loads(l) for l in open(a.pairs) if l.strip()]
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
losses = []
k = 0
for step in range(a.steps):
    batch = [recs[(k + i) % len(recs)] for i in range(a.pairs_per_step)]
    k += a.pairs_per_step
    opt.zero_grad()
    total = 0.0
    for rec in batch:
        (c, cs), (r, rs) = encode(rec, "chosen"), encode(rec, "rejected")
        with torch.no_grad(), model.disable_adapter():
            rc, rr = logp_sum(c, cs), logp_sum(r, rs)
        pc, pr = logp_sum(c, cs), logp_sum(r, rs)
        z = a.beta * ((pc - rc) - (pr - rr))
        loss = -torch.nn.functional.logsigmoid(z) / len(batch)
        loss.backward()
        total += loss.item()
    if a.max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, a.max_grad_norm)
    opt.step()
    losses.append(total)

ours = load_file(f"{a.st_out}/adapter_model.safetensors")
theirs = {n.replace(".default", ""): p.detach() for n, p in model.named_parameters() if "lora_" in n}
worst, worst_name, n = 0.0, "", 0
for name, ref in theirs.items():
    key = name if name in ours else next((k2 for k2 in ours if k2.endswith(name.split("model.", 1)[-1])), None)
    if key is None:
        print(json.dumps({"error": f"{name} missing from streamtune's adapter"}))
        sys.exit(1)
    got = ours[key].float()
    err = (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
    n += 1
    if err > worst:
        worst, worst_name = err, name
st_losses = [json.loads(l)["loss"] for l in open(f"{a.st_out}/metrics.jsonl") if '"loss"' in l]
res = {"tensors": n, "max_rel_err": worst, "worst": worst_name, "torch_losses": losses, "streamtune_losses": st_losses,
       "ok": worst <= a.tol}
print(json.dumps(res))
sys.exit(0 if res["ok"] else 1)
