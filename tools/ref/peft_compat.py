#!/usr/bin/env python3
"""PEFT compatibility check (issue "product" §7), driven by tools/ref/peft_compat.sh.

Two directions, each in float32 and bfloat16:
  ours -> PEFT: an adapter trained by `streamtune train` is loaded with PeftModel.from_pretrained
                onto the transformers model; its logits must match `streamtune logits`.
  PEFT -> ours: an adapter trained by PEFT itself (LoraConfig r=8, all 7 projections, a few AdamW
                steps so B != 0, save_pretrained) is run by `streamtune logits --adapter`.

Subcommands (each case is a directory made by peft_compat.sh: model/, train.jsonl, eval.jsonl,
ours_adapter/, st_ours.safetensors, and after `make-peft`: peft_adapter/, st_peft.safetensors):
  data       write train.jsonl / eval.jsonl for a model (ids < its vocab, fixed seed)
  make-peft  train and save a PEFT adapter per case
  compare    HF + PEFT logits for every case vs streamtune's; JSON summary + table

Tolerances. float32: ||ours - hf|| / ||hf|| < 1e-4 (both sides are IEEE f32 with f32 accumulation,
TF32 off; what remains is summation order, ~1e-6). bfloat16: the two implementations round at
different points (bf16 unit roundoff 2^-9 ~ 2e-3 per rounding, a few roundings per layer), so we
do not require them to agree more than either agrees with the exact answer. The exact answer
("truth") is the same checkpoint upcast to f32 with the same adapter, run by HF in f32. A bf16 case
passes when (1) ||ours - hf_bf16|| / ||hf_bf16|| < 2e-2 (a hard cap) and (2) ours is no less
accurate than HF's own bf16 run: err(ours, truth) <= 2 * err(hf_bf16, truth) + 1e-3.
Every case must also show that the adapter matters: ||hf(adapter) - hf(base)|| / ||hf(adapter)||
>= 1e-2, or a match would say nothing about LoRA.
"""
import argparse
import json
import os
import random
import sys

for _k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_R, LORA_ALPHA = 8, 16
F32_TOL = 1e-4
BF16_CAP = 2e-2
BF16_RATIO, BF16_FLOOR = 2.0, 1e-3
MIN_EFFECT = 1e-2
EVAL_LENGTHS = [7, 16, 33, 64]


def log(*a):
    print("[peft_compat]", *a, file=sys.stderr, flush=True)


# ---- data ------------------------------------------------------------------------------------

def cmd_data(args):
    with open(os.path.join(args.model, "config.json")) as f:
        vocab = int(json.load(f)["vocab_size"])
    r = random.Random(args.seed)
    with open(args.train, "w") as f:
        for _ in range(args.train_rows):
            f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(args.train_len)]}) + "\n")
    with open(args.eval, "w") as f:
        for n in EVAL_LENGTHS:
            f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(n)]}) + "\n")


def read_rows(path):
    with open(path) as f:
        return [json.loads(l)["input_ids"] for l in f if l.strip()]


# ---- torch helpers ---------------------------------------------------------------------------

def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # bf16 GEMMs accumulate in f32 throughout (as ours do), not in reduced precision split-K.
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"  # torch >= 2.9 spelling
    except Exception:  # noqa: BLE001 - older torch: allow_tf32 above is enough
        pass
    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_dtype(name):
    import torch
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def load_base(model_dir, dtype, device):
    import transformers
    kw = dict(attn_implementation="eager")
    try:
        m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **kw)
    except TypeError:  # transformers 4 spelling
        m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, **kw)
    if m.dtype != dtype:
        m = m.to(dtype)
    return m.to(device).eval()


# ---- PEFT training ---------------------------------------------------------------------------

def cmd_make_peft(args):
    import torch
    from peft import LoraConfig, get_peft_model
    device = torch_setup()
    for case in args.cases:
        meta = json.load(open(os.path.join(case, "case.json")))
        dtype = torch_dtype(meta["dtype"])
        torch.manual_seed(1234)
        base = load_base(os.path.join(case, "model"), dtype, device)
        # RSLORA=true (peft_compat.sh passes it through): both sides scale by alpha / sqrt(r).
        rslora = os.environ.get("RSLORA", "false") == "true"
        dora = os.environ.get("DORA", "false") == "true"  # DORA=true: both sides train DoRA adapters
        cfg = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules=TARGETS, bias="none",
                         task_type="CAUSAL_LM", use_rslora=rslora, use_dora=dora)
        pm = get_peft_model(base, cfg)
        params = [p for _, p in pm.named_parameters() if p.requires_grad]
        assert params, "no trainable LoRA parameters"
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
        rows = read_rows(os.path.join(case, "train.jsonl"))
        pm.train()
        losses = []
        for step in range(args.steps):
            ids = torch.tensor([rows[(2 * step) % len(rows)], rows[(2 * step + 1) % len(rows)]], device=device)
            loss = pm(input_ids=ids, labels=ids).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss))
        b_max = max(p.detach().abs().max().item() for n, p in pm.named_parameters() if "lora_B" in n)
        assert b_max > 0, "PEFT training left every lora_B at zero"
        pm.save_pretrained(os.path.join(case, "peft_adapter"))
        log(f"{case}: PEFT adapter, {args.steps} steps, losses {[round(x, 4) for x in losses]}, max|B| {b_max:.3g}")
        del pm, base, opt
        if device == "cuda":
            torch.cuda.empty_cache()


# ---- comparison ------------------------------------------------------------------------------

def hf_logits(model, rows, device):
    import torch
    out = []
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([r], dtype=torch.long, device=device)
            out.append(model(input_ids=ids).logits[0].float().cpu().numpy())
    return out


def hf_peft_logits(model_dir, adapter_dir, dtype, rows, device, with_base):
    """Logits with the adapter, and (with_base) with it disabled."""
    import torch
    from peft import PeftModel
    base = load_base(model_dir, dtype, device)
    pm = PeftModel.from_pretrained(base, adapter_dir).eval()
    got = hf_logits(pm, rows, device)
    base_out = None
    if with_base:
        with pm.disable_adapter():
            base_out = hf_logits(pm, rows, device)
    del pm, base
    if device == "cuda":
        torch.cuda.empty_cache()
    return got, base_out


def read_ours(path, n):
    from safetensors.numpy import load_file
    t = load_file(path)
    missing = [f"logits_{i}" for i in range(n) if f"logits_{i}" not in t]
    if missing:
        raise RuntimeError(f"{path}: missing {missing}")
    return [t[f"logits_{i}"] for i in range(n)]


def rel_norm(a_list, b_list):
    import numpy as np
    num = sum(float(np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2)) for a, b in zip(a_list, b_list))
    den = sum(float(np.sum(b.astype(np.float64) ** 2)) for b in b_list)
    return (num / den) ** 0.5 if den > 0 else float("inf")


def diff_stats(ours, ref):
    import numpy as np
    for o, r in zip(ours, ref):
        if o.shape != r.shape:
            raise RuntimeError(f"shape mismatch: ours {o.shape} vs hf {r.shape}")
    max_abs = max(float(np.abs(o.astype(np.float64) - r).max()) for o, r in zip(ours, ref))
    max_ref = max(float(np.abs(r).max()) for r in ref)
    agree = sum(int((o.argmax(-1) == r.argmax(-1)).sum()) for o, r in zip(ours, ref))
    total = sum(r.shape[0] for r in ref)
    return {"max_abs_diff": max_abs, "max_abs_ref": max_ref, "rel_max": max_abs / max_ref if max_ref else float("inf"),
            "rel_norm": rel_norm(ours, ref), "argmax_agree": agree / total, "positions": total}


def compare_case(case, which, device, versions):
    meta = json.load(open(os.path.join(case, "case.json")))
    dtype_name = meta["dtype"]
    rows = read_rows(os.path.join(case, "eval.jsonl"))
    model_dir = os.path.join(case, "model")
    adapter = os.path.join(case, f"{which}_adapter")
    res = {"preset": meta["preset"], "dtype": dtype_name,
           "direction": "ours->PEFT" if which == "ours" else "PEFT->ours", "adapter": adapter,
           "rows": [len(r) for r in rows]}
    try:
        ours = read_ours(os.path.join(case, f"st_{which}.safetensors"), len(rows))
        ref, ref_base = hf_peft_logits(model_dir, adapter, torch_dtype(dtype_name), rows, device, True)
        res.update(diff_stats(ours, ref))
        res["adapter_effect_rel"] = rel_norm(ref_base, ref)
        ok = res["adapter_effect_rel"] >= MIN_EFFECT
        if dtype_name == "float32":
            res["tolerance"] = f"rel_norm < {F32_TOL:g}"
            ok = ok and res["rel_norm"] < F32_TOL
        else:
            truth, _ = hf_peft_logits(model_dir, adapter, torch_dtype("float32"), rows, device, False)
            res["ours_vs_truth"] = rel_norm(ours, truth)
            res["hf_bf16_vs_truth"] = rel_norm(ref, truth)
            bound = BF16_RATIO * res["hf_bf16_vs_truth"] + BF16_FLOOR
            res["tolerance"] = (f"rel_norm < {BF16_CAP:g} and ours_vs_truth <= {BF16_RATIO:g}*hf_bf16_vs_truth"
                                f" + {BF16_FLOOR:g} (= {bound:.3g})")
            ok = ok and res["rel_norm"] < BF16_CAP and res["ours_vs_truth"] <= bound
        res["pass"] = bool(ok)
    except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
        import traceback
        traceback.print_exc()
        res["error"] = f"{type(e).__name__}: {e}"
        res["pass"] = False
    return res


def fmt(x, spec=".2e"):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def table(results):
    lines = ["| preset | dtype | direction | max abs diff | rel (norm) | argmax agree | adapter effect |"
             " ours vs f32 truth | HF bf16 vs truth | pass |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['preset']} | {r['dtype']} | {r['direction']} | ERROR: {r['error']} |"
                         " | | | | | FAIL |")
            continue
        lines.append(f"| {r['preset']} | {r['dtype']} | {r['direction']} | {fmt(r['max_abs_diff'])} |"
                     f" {fmt(r['rel_norm'])} | {r['argmax_agree'] * 100:.1f}% | {fmt(r['adapter_effect_rel'])} |"
                     f" {fmt(r.get('ours_vs_truth'))} | {fmt(r.get('hf_bf16_vs_truth'))} |"
                     f" {'ok' if r['pass'] else 'FAIL'} |")
    return "\n".join(lines)


def cmd_compare(args):
    import torch
    import transformers
    import peft
    device = torch_setup()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                "python": sys.version.split()[0]}
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    results = []
    for case in args.cases:
        for which in ("ours", "peft"):
            r = compare_case(case, which, device, versions)
            log(json.dumps({k: v for k, v in r.items() if k != "adapter"}))
            results.append(r)
    summary = {
        "versions": versions, "hf_device": gpu, "streamtune": args.streamtune_version,
        "settings": {"lora_r": LORA_R, "lora_alpha": LORA_ALPHA, "targets": TARGETS, "eval_lengths": EVAL_LENGTHS,
                     "attn_implementation": "eager", "tf32": False, "bf16_reduced_precision_reduction": False,
                     "f32_tol": F32_TOL, "bf16_cap": BF16_CAP, "bf16_ratio": BF16_RATIO, "bf16_floor": BF16_FLOOR,
                     "min_adapter_effect": MIN_EFFECT},
        "cases": results,
        "all_pass": all(r["pass"] for r in results) and bool(results),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(summary, f, indent=1)
    t = table(results)
    with open(os.path.splitext(args.json)[0] + ".md", "w") as f:
        f.write(t + "\n")
    print(f"HF side: torch {versions['torch']}, transformers {versions['transformers']}, peft {versions['peft']}"
          f" on {gpu}; streamtune: {args.streamtune_version}")
    print(t)
    print("ALL PASS" if summary["all_pass"] else "SOME CASES FAILED")
    return 0 if summary["all_pass"] else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--model", required=True)
    d.add_argument("--train", required=True)
    d.add_argument("--eval", required=True)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--train-rows", type=int, default=16)
    d.add_argument("--train-len", type=int, default=64)
    m = sub.add_parser("make-peft")
    m.add_argument("cases", nargs="+")
    m.add_argument("--steps", type=int, default=8)
    m.add_argument("--lr", type=float, default=1e-2)
    c = sub.add_parser("compare")
    c.add_argument("cases", nargs="+")
    c.add_argument("--json", required=True)
    c.add_argument("--streamtune-version", default="?")
    args = p.parse_args()
    if args.cmd == "data":
        return cmd_data(args) or 0
    if args.cmd == "make-peft":
        return cmd_make_peft(args) or 0
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
