#!/usr/bin/env python3
"""Preference losses in PyTorch + PEFT, the reference for `streamtune train` with rl: dpo / ipo /
orpo / simpo / kto.

Trains the same LoRA adapter the same number of steps on the same pairs, in the same order, with
the loss written here with autograd as TRL defines it -- DPO (sigmoid) and IPO against the same
model under `disable_adapter()` (what TRL uses for a PEFT model without ref_model); IPO, ORPO and
SimPO on mean log-probs over the reply; ORPO's NLL over every token of the chosen sequence (prompt
included, TRL's ORPOTrainer), SimPO's over the chosen reply (TRL's CPOTrainer, times cpo_alpha);
the NLL a mean over the step's tokens -- and AdamW (torch's) with global grad-norm clipping, then
compares its adapter with streamtune's.

usage: preference_ref.py MODEL_DIR INIT_ADAPTER PAIRS_JSONL STREAMTUNE_OUT --loss dpo|ipo|orpo|simpo|kto|...
                         --beta B --lr LR --steps N --pairs-per-step P [--gamma 0.5] [--cpo-alpha 1]
                         [--rpo-alpha 0] [--desirable-weight 1] [--undesirable-weight 1]
                         [--max-grad-norm 1.0] [--tol 2e-3]
PAIRS_JSONL records: {"messages": [{"role": "user", "content": q}], "chosen": {"content": a},
"rejected": {"content": b}} rendered as ChatML (the config's chat_template: chatml); the reply's
tokens and its <|im_end|> are trained, the template's newline after it is part of the sequence.
One micro-batch a step (micro_batch_size = P, no accumulation).
--loss kto reads KTO records {"prompt": [{"role": "user", "content": q}], "completion": [{"role":
"assistant", "content": a}], "label": bool} (P examples a step) and writes KTO as TRL's KTOTrainer
does (loss_type kto): z0 = max(0, mean of the micro-batch's KL log-ratios) without gradient, the
KL sequences being each example's prompt followed by the reply of the example before it in the
micro-batch (mod P: streamtune's data/data_loader.h Note [KTO batches]), then the mean of
w_d (1 - sigmoid(beta (r - z0))) / w_u (1 - sigmoid(beta (z0 - r))) over the examples. Prints one JSON line; exit 1 when an
adapter tensor differs by more than --tol (max |d| / max |ref|).
"""
import argparse, json, math, sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

ap = argparse.ArgumentParser()
ap.add_argument("model"); ap.add_argument("init_adapter"); ap.add_argument("pairs"); ap.add_argument("st_out")
VARIANTS = ["hinge", "robust", "exo_pair", "nca_pair", "sppo_hard", "apo_zero", "apo_down", "discopop", "sigmoid_norm"]
ap.add_argument("--loss", choices=["dpo", "ipo", "orpo", "simpo", "kto"] + VARIANTS, default="dpo")
ap.add_argument("--desirable-weight", type=float, default=1.0); ap.add_argument("--undesirable-weight", type=float, default=1.0)
ap.add_argument("--label-smoothing", type=float, default=0.0); ap.add_argument("--tau", type=float, default=0.05)
ap.add_argument("--gamma", type=float, default=0.5); ap.add_argument("--cpo-alpha", type=float, default=1.0)
ap.add_argument("--rpo-alpha", type=float, default=0.0)  # DPO / IPO + rpo_alpha x the chosen reply's NLL (TRL's RPO)
ap.add_argument("--beta", type=float, required=True); ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--steps", type=int, required=True); ap.add_argument("--pairs-per-step", type=int, required=True)
ap.add_argument("--max-grad-norm", type=float, default=1.0); ap.add_argument("--tol", type=float, default=2e-3)
a = ap.parse_args()

torch.manual_seed(0)
tok = PreTrainedTokenizerFast(tokenizer_file=f"{a.model}/tokenizer.json")
base = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32, attn_implementation="eager")
model = PeftModel.from_pretrained(base, a.init_adapter, is_trainable=True)
model.train()  # LoRA dropout is 0 in the configs this compares

def content(x):  # a string, a message, or a list of one message
    x = x[0] if isinstance(x, list) else x
    return x["content"] if isinstance(x, dict) else x

def encode(rec, key):  # the sequence's ids, the reply's first index and its end (after <|im_end|>)
    q = content(rec["messages"] if "messages" in rec else rec["prompt"])
    prompt = f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
    reply = content(rec[key])
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    end = len(tok(prompt + reply + "<|im_end|>", add_special_tokens=False)["input_ids"])
    ids = tok(prompt + reply + "<|im_end|>\n", add_special_tokens=False)["input_ids"]
    assert ids[: len(p)] == p, "the prompt's tokens are not a prefix"
    return ids, len(p), end

def token_logps(ids):  # log p of tokens 1 .. len-1
    x = torch.tensor([ids])
    lp = torch.log_softmax(model(input_ids=x).logits[0].float(), -1)
    return lp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]

F = torch.nn.functional
recs = [json.loads(l) for l in open(a.pairs) if l.strip()]
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
mean = a.loss in ("ipo", "orpo", "simpo")
nll_w = {"orpo": 1.0, "simpo": a.cpo_alpha}.get(a.loss, a.rpo_alpha)
losses = []
k = 0
def kto_step(batch):
    """One KTO micro-batch: z0 from the KL sequences (no gradient), then each example's loss / P."""
    enc = [encode(rec, "completion") for rec in batch]
    P = len(enc)
    def reply_sum(ids, s, e): return token_logps(ids)[s - 1 : e - 1].sum()
    with torch.no_grad():
        kl = []  # (ids, reply start, reply end): prompt j + the reply of example j - 1
        for j, (ids, s, e) in enumerate(enc):
            oids, os_, oe = enc[(j - 1) % P]
            kl.append((ids[:s] + oids[os_:], s, s + (oe - os_)))
        kl_pol = [reply_sum(*x) for x in kl]
        with model.disable_adapter():
            kl_ref = [reply_sum(*x) for x in kl]
            refs = [reply_sum(*x) for x in enc]
        z0 = max(0.0, sum((p - r).item() for p, r in zip(kl_pol, kl_ref)) / P)
    total = 0.0
    for rec, x, ref in zip(batch, enc, refs):
        r = reply_sum(*x) - ref
        if rec["label"]:
            loss = a.desirable_weight * (1 - torch.sigmoid(a.beta * (r - z0)))
        else:
            loss = a.undesirable_weight * (1 - torch.sigmoid(a.beta * (z0 - r)))
        (loss / P).backward()
        total += loss.item() / P
    return total

for step in range(a.steps):
    batch = [recs[(k + i) % len(recs)] for i in range(a.pairs_per_step)]
    k += a.pairs_per_step
    if a.loss == "kto":
        opt.zero_grad()
        losses.append(kto_step(batch))
        if a.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, a.max_grad_norm)
        opt.step()
        continue
    enc = [(encode(rec, "chosen"), encode(rec, "rejected")) for rec in batch]
    # The NLL's tokens over the micro-batch: the chosen sequences' (ORPO) or the chosen replies'.
    n_nll = sum((len(c) - 1) if a.loss == "orpo" else (ce - cs) for (c, cs, ce), _ in enc)
    opt.zero_grad()
    total = 0.0
    for (c, cs, ce), (r, rs, re_) in enc:
        lc, lr_ = token_logps(c), token_logps(r)
        pc, pr = lc[cs - 1 : ce - 1].sum(), lr_[rs - 1 : re_ - 1].sum()
        if mean:
            pc, pr = pc / (ce - cs), pr / (re_ - rs)
        if a.loss in ["dpo", "ipo"] + VARIANTS:
            with torch.no_grad(), model.disable_adapter():
                rc, rr = token_logps(c)[cs - 1 : ce - 1].sum(), token_logps(r)[rs - 1 : re_ - 1].sum()
            if mean:
                rc, rr = rc / (ce - cs), rr / (re_ - rs)
        if a.loss == "dpo":
            pair = -F.logsigmoid(a.beta * ((pc - rc) - (pr - rr)))
        elif a.loss == "ipo":
            pair = ((pc - rc) - (pr - rr) - 1 / (2 * a.beta)) ** 2
        elif a.loss in VARIANTS:  # TRL DPOTrainer's other loss_types, on the summed log-ratios
            cl, rl, e, b = pc - rc, pr - rr, a.label_smoothing, a.beta
            z = b * (cl - rl)
            pair = {
                "hinge": lambda: torch.relu(1 - z),
                "robust": lambda: (-F.logsigmoid(z) * (1 - e) + F.logsigmoid(-z) * e) / (1 - 2 * e),
                "exo_pair": lambda: z.sigmoid() * (F.logsigmoid(z) - math.log(1 - (e or 1e-3)))
                + (-z).sigmoid() * (F.logsigmoid(-z) - math.log(e or 1e-3)),
                "nca_pair": lambda: -F.logsigmoid(b * cl) - 0.5 * F.logsigmoid(-b * cl) - 0.5 * F.logsigmoid(-b * rl),
                "sppo_hard": lambda: (cl - 0.5 / b) ** 2 + (rl + 0.5 / b) ** 2,
                "apo_zero": lambda: (1 - torch.sigmoid(b * cl)) + torch.sigmoid(b * rl),
                "apo_down": lambda: torch.sigmoid(b * cl) + (1 - torch.sigmoid(z)),
                "discopop": lambda: -F.logsigmoid(z) * (1 - torch.sigmoid(z / a.tau))
                + torch.exp(-z) * torch.sigmoid(z / a.tau),
                "sigmoid_norm": lambda: -F.logsigmoid(b * (cl / (ce - cs) - rl / (re_ - rs))),
            }[a.loss]()
        elif a.loss == "orpo":
            lo = (pc - pr) - (torch.log1p(-torch.exp(pc)) - torch.log1p(-torch.exp(pr)))
            pair = -a.beta * F.logsigmoid(lo)
        else:
            pair = -F.logsigmoid(a.beta * (pc - pr) - a.gamma)
        loss = pair / len(batch)
        if nll_w:
            nll_sum = -(lc.sum() if a.loss == "orpo" else lc[cs - 1 : ce - 1].sum())
            loss = loss + nll_w * nll_sum / n_nll
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
res = {"loss": a.loss, "tensors": n, "max_rel_err": worst, "worst": worst_name, "torch_losses": losses, "streamtune_losses": st_losses,
       "ok": worst <= a.tol}
print(json.dumps(res))
sys.exit(0 if res["ok"] else 1)
