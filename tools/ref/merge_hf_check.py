#!/usr/bin/env python3
"""`streamtune merge` output against transformers + PEFT, driven by tools/ref/merge_hf_check.sh.

A case is a directory made by the .sh: model/ (the base), adapter/ (trained by `streamtune train`),
merged_f32/ (`streamtune merge --dtype float32`), optionally merged_bf16/ (merge in the base's
bf16), eval.jsonl (fixed token rows) and st_base / st_adapter / st_merged_f32 [/ st_merged_bf16]
.safetensors (`streamtune logits`, f32 activations).

Subcommands:
  data     write train.jsonl / eval.jsonl for a model (ids < its vocab, fixed seed)
  tokenizer  pad a trimmed byte-level tokenizer.json to the model's vocab (see cmd_tokenizer)
  check    every check below for the given cases; one line per check; exit 1 on any FAIL

Checks without torch (numpy only; safetensors read by the small reader below):
  files      the merged dir has config.json with the base's architecture and tie flag, and every
             tokenizer/generation file the base had, byte for byte
  tensors    merged tensor names and shapes == the base's (a tied model gets no lm_head); dtype
             as requested
  weights    adapted projections == W + (alpha/r) * B @ A computed here in f64 from the base and
             adapter files (rel max abs diff < 1e-6 for f32 output, < 2^-8 for bf16); every other
             tensor is the base's, converted exactly
  effect     the adapter matters: ||st(base+adapter) - st(base)|| / ||st(base+adapter)|| >= 1e-2
  st         streamtune logits of merged_f32 == streamtune logits of base+adapter (rel max < 1e-4);
             merged_bf16 within rel norm 2e-2
With torch + transformers + peft (skipped, loudly, when `import torch` fails):
  hf-load    AutoModelForCausalLM.from_pretrained(merged_f32, float32, eager) loads with no missing
             or unexpected keys
  peft       HF(merged_f32) == HF(base f32) + PeftModel.from_pretrained(adapter)  (rel max < 1e-4)
  hf-vs-st   HF(merged_f32) == streamtune logits of merged_f32 and of base+adapter (rel max < 1e-4)
  hf-bf16    HF(merged_bf16, upcast to f32) vs the PEFT f32 truth: rel norm < 2e-2
  tokenizer  when the base has tokenizer.json: AutoTokenizer loads the merged dir and encodes a
             sample text to the same ids as from the base dir
"rel max" = max abs diff / max |reference|; "rel norm" = ||a - ref|| / ||ref||.
"""
import argparse
import glob
import json
import os
import random
import struct
import sys

import numpy as np

for _k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CARRIED_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"]
F32_TOL = 1e-4
BF16_TOL = 2e-2
MIN_EFFECT = 1e-2
WEIGHT_TOL = {"F32": 1e-6, "BF16": 2.0 ** -8}
SAMPLE_TEXT = "The quick brown fox jumps over the lazy dog. Merged models keep their tokenizer!"


class Report:
    def __init__(self):
        self.fails = 0
        self.count = 0

    def line(self, case, name, ok, detail):
        self.count += 1
        self.fails += 0 if ok else 1
        print(f"check {case:<14} {name:<22} {detail}  {'ok' if ok else 'FAIL'}", flush=True)

    def error(self, case, name, err):
        self.line(case, name, False, f"error: {type(err).__name__}: {err}")


# ---- safetensors without the safetensors package -----------------------------------------------

_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


class StFile:
    """One .safetensors file, memory-mapped; tensors come back as float64 (or native ints)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            self.header = json.loads(f.read(n))
        self.header.pop("__metadata__", None)
        self.base = 8 + n
        self.mm = np.memmap(path, dtype=np.uint8, mode="r")

    def names(self):
        return list(self.header)

    def dtype(self, name):
        return self.header[name]["dtype"]

    def shape(self, name):
        return list(self.header[name]["shape"])

    def raw(self, name):
        h = self.header[name]
        b, e = h["data_offsets"]
        return self.mm[self.base + b:self.base + e]

    def get(self, name):
        h = self.header[name]
        buf = self.raw(name)
        if h["dtype"] == "BF16":
            a = (buf.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif h["dtype"] in _NP:
            a = buf.view(_NP[h["dtype"]])
        else:
            raise RuntimeError(f"{self.path}: {name}: dtype {h['dtype']} not supported here")
        return a.reshape(h["shape"]).astype(np.float64) if a.dtype.kind == "f" else a.reshape(h["shape"])


class Checkpoint:
    """All *.safetensors files of a directory as one name -> tensor map."""

    def __init__(self, d):
        files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
        if not files:
            raise RuntimeError(f"{d}: no .safetensors files")
        self.where = {}
        for p in files:
            f = StFile(p)
            for n in f.names():
                if n in self.where:
                    raise RuntimeError(f"{d}: tensor {n} in {self.where[n].path} and {p}")
                self.where[n] = f

    def names(self):
        return set(self.where)

    def dtype(self, name):
        return self.where[name].dtype(name)

    def shape(self, name):
        return self.where[name].shape(name)

    def get(self, name):
        return self.where[name].get(name)


# ---- data --------------------------------------------------------------------------------------

def cmd_data(args):
    with open(os.path.join(args.model, "config.json")) as f:
        vocab = int(json.load(f)["vocab_size"])
    r = random.Random(args.seed)
    with open(args.train, "w") as f:
        for _ in range(args.train_rows):
            f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(args.train_len)]}) + "\n")
    with open(args.eval, "w") as f:
        for n in args.eval_lengths:
            f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(n)]}) + "\n")
    return 0


def cmd_tokenizer(args):
    """A copy of a (trimmed) byte-level BPE tokenizer.json whose vocab is padded to the model's with
    tokens "Ġt<id>" (decoded " t<id>"), so every id a random model picks shows in the text; plus the
    small config files a real SmolLM2 checkpoint ships (so `merge` has something to carry)."""
    t = json.load(open(args.src))
    vocab = t["model"]["vocab"]
    taken = set(vocab.values()) | {a["id"] for a in t.get("added_tokens", [])}
    for i in range(args.vocab):
        if i not in taken:
            name = f"\u0120t{i}"
            if name in vocab:
                raise RuntimeError(f"{args.src}: {name!r} already in the vocab")
            vocab[name] = i
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(t, f, ensure_ascii=False)
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(dict(special, add_prefix_space=False, model_max_length=8192, tokenizer_class="GPT2Tokenizer",
                       clean_up_tokenization_spaces=False), f, indent=1)
    with open(os.path.join(args.out, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=1)
    return 0


def read_rows(path):
    with open(path) as f:
        return [json.loads(line)["input_ids"] for line in f if line.strip()]


# ---- comparisons -------------------------------------------------------------------------------

def stats(got, ref):
    """rel max and rel norm over lists of arrays (ref is the reference)."""
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            raise RuntimeError(f"shape {g.shape} vs reference {r.shape}")
    g64 = [np.asarray(g, np.float64) for g in got]
    r64 = [np.asarray(r, np.float64) for r in ref]
    max_abs = max(float(np.abs(g - r).max()) for g, r in zip(g64, r64))
    max_ref = max(float(np.abs(r).max()) for r in r64)
    num = sum(float(((g - r) ** 2).sum()) for g, r in zip(g64, r64))
    den = sum(float((r ** 2).sum()) for r in r64)
    return {"max_abs": max_abs, "rel_max": max_abs / max_ref if max_ref else float("inf"),
            "rel_norm": (num / den) ** 0.5 if den else float("inf")}


def detail(s, key, tol):
    return f"max_abs_diff={s['max_abs']:.3e} {key}={s[key]:.3e} (tol {tol:g})"


def compare(rep, case, name, got, ref, key, tol):
    try:
        s = stats(got, ref)
    except Exception as e:  # noqa: BLE001 - a shape mismatch is a failed check, not a crash
        rep.error(case, name, e)
        return None
    rep.line(case, name, s[key] < tol, detail(s, key, tol))
    return s


def read_logits(path, n):
    f = StFile(path)
    missing = [f"logits_{i}" for i in range(n) if f"logits_{i}" not in f.header]
    if missing:
        raise RuntimeError(f"{path}: missing {missing}")
    return [f.get(f"logits_{i}") for i in range(n)]


# ---- checks without torch ----------------------------------------------------------------------

def check_files(rep, case, model, merged):
    bc = json.load(open(os.path.join(model, "config.json")))
    mc = json.load(open(os.path.join(merged, "config.json")))
    bad = [k for k in ("architectures", "model_type", "vocab_size", "num_hidden_layers", "hidden_size")
           if bc.get(k) != mc.get(k)]
    if bool(bc.get("tie_word_embeddings", False)) != bool(mc.get("tie_word_embeddings", False)):
        bad.append("tie_word_embeddings")
    carried, missing = [], []
    for f in CARRIED_FILES:
        src = os.path.join(model, f)
        if not os.path.exists(src):
            continue
        dst = os.path.join(merged, f)
        if os.path.exists(dst) and open(src, "rb").read() == open(dst, "rb").read():
            carried.append(f)
        else:
            missing.append(f)
    ok = not bad and not missing
    rep.line(case, f"files {os.path.basename(merged)}", ok,
             f"config keys differing: {bad or 'none'}; carried {carried or 'nothing'}"
             + (f"; MISSING/CHANGED {missing}" if missing else ""))


def adapter_deltas(adapter_dir):
    """{hf weight name: (A [r,in], B [out,r])} and the scale alpha/r from a PEFT adapter."""
    cfg = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    scale = cfg["lora_alpha"] / cfg["r"]
    if cfg.get("use_rslora"):
        scale = cfg["lora_alpha"] / cfg["r"] ** 0.5
    f = StFile(os.path.join(adapter_dir, "adapter_model.safetensors"))
    out = {}
    for n in f.names():
        if ".lora_A." not in n:
            continue
        site = n.split(".lora_A.")[0]
        hf = site[len("base_model.model."):] if site.startswith("base_model.model.") else site
        out[hf + ".weight"] = (f.get(n), f.get(n.replace(".lora_A.", ".lora_B.")))
    return out, scale


def check_tensors_and_weights(rep, case, model, adapter, merged, want_dtype):
    base, mg = Checkpoint(model), Checkpoint(merged)
    tag = os.path.basename(merged)
    extra, lost = sorted(mg.names() - base.names()), sorted(base.names() - mg.names())
    shapes = [n for n in base.names() & mg.names() if base.shape(n) != mg.shape(n)]
    dtypes = sorted({mg.dtype(n) for n in mg.names()})
    ok = not extra and not lost and not shapes and dtypes == [want_dtype]
    rep.line(case, f"tensors {tag}", ok, f"{len(mg.names())} tensors, dtypes {dtypes} (want {want_dtype});"
             f" extra {extra[:4]} missing {lost[:4]} shape-mismatch {shapes[:4]}")
    if extra or lost or shapes:
        return
    deltas, scale = adapter_deltas(adapter)
    targets = sorted({n.split(".")[-2] for n in deltas})
    tol = WEIGHT_TOL[want_dtype]
    worst_delta, worst_copy, copy_tol, unchanged = 0.0, 0.0, 0.0, 0
    for n in sorted(base.names()):
        w0, w1 = base.get(n), mg.get(n)
        if n in deltas:
            a, b = deltas[n]
            want = w0 + scale * (b @ a)
            err = float(np.abs(w1 - want).max()) / max(float(np.abs(want).max()), 1e-30)
            worst_delta = max(worst_delta, err)
            if np.array_equal(w0, w1):
                unchanged += 1
        else:
            # The base value, converted: exact when widening or keeping the dtype (bf16 -> f32,
            # f32 -> f32), rounded only when narrowing (f32 -> bf16).
            err = float(np.abs(w1 - w0).max()) / max(float(np.abs(w0).max()), 1e-30)
            narrowing = base.dtype(n) != want_dtype and want_dtype != "F32"
            worst_copy = max(worst_copy, err)
            copy_tol = max(copy_tol, tol if narrowing else 0.0)
    missing_sites = [n for n in deltas if n not in base.names()]
    ok = worst_delta < tol and worst_copy <= copy_tol and unchanged == 0 and not missing_sites and deltas
    rep.line(case, f"weights {tag}", ok,
             f"{len(deltas)} adapted ({','.join(targets)}; scale {scale:g}): W+sBA rel max {worst_delta:.2e}"
             f" (tol {tol:.1e}); other tensors rel max {worst_copy:.1e} (tol {copy_tol:g});"
             f" unchanged adapted {unchanged}" + (f"; adapter sites not in base {missing_sites[:3]}" if missing_sites
                                                  else ""))


def check_case_numpy(rep, case_dir):
    case = os.path.basename(case_dir.rstrip("/"))
    model, adapter = os.path.join(case_dir, "model"), os.path.join(case_dir, "adapter")
    rows = read_rows(os.path.join(case_dir, "eval.jsonl"))
    merged = {}
    for tag, want in (("merged_f32", "F32"), ("merged_bf16", "BF16")):
        d = os.path.join(case_dir, tag)
        if not os.path.isdir(d):
            continue
        merged[tag] = d
        for fn in (lambda: check_files(rep, case, model, d),
                   lambda: check_tensors_and_weights(rep, case, model, adapter, d, want)):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - report and go on with the other checks
                rep.error(case, f"files/tensors {tag}", e)
    st = {}
    try:
        for k in ["base", "adapter"] + list(merged):
            st[k] = read_logits(os.path.join(case_dir, f"st_{k}.safetensors"), len(rows))
        s = stats(st["base"], st["adapter"])
        rep.line(case, "effect st(base+A)", s["rel_norm"] >= MIN_EFFECT,
                 f"vs st(base): rel_norm={s['rel_norm']:.3e} (need >= {MIN_EFFECT:g})")
        if "merged_f32" in st:
            compare(rep, case, "st merged_f32~base+A", st["merged_f32"], st["adapter"], "rel_max", F32_TOL)
        if "merged_bf16" in st:
            compare(rep, case, "st merged_bf16~base+A", st["merged_bf16"], st["adapter"], "rel_norm", BF16_TOL)
    except Exception as e:  # noqa: BLE001
        rep.error(case, "streamtune logits", e)
    return case, model, adapter, rows, merged, st


# ---- checks with torch -------------------------------------------------------------------------

def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"  # torch >= 2.9 spelling
    except Exception:  # noqa: BLE001 - older torch: allow_tf32 above is enough
        pass
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_hf(model_dir, device):
    """f32 eager model and the loading info (missing / unexpected keys)."""
    import torch
    import transformers
    kw = dict(attn_implementation="eager", output_loading_info=True)
    try:
        res = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kw)
    except TypeError:  # transformers 4 spelling
        res = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, **kw)
    m, info = res if isinstance(res, tuple) else (res, {})
    return m.float().to(device).eval(), info


def hf_logits(model, rows, device):
    import torch
    out = []
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([r], dtype=torch.long, device=device)
            out.append(model(input_ids=ids).logits[0].float().cpu().numpy())
    return out


def free(device):
    import gc
    gc.collect()
    if device == "cuda":
        import torch
        torch.cuda.empty_cache()


def check_case_torch(rep, device, case, model, adapter, rows, merged, st):
    from peft import PeftModel
    if "merged_f32" not in merged:
        rep.line(case, "hf-load merged_f32", False, "no merged_f32 dir")
        return
    hf_merged = None
    try:
        m, info = load_hf(merged["merged_f32"], device)
        bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
        rep.line(case, "hf-load merged_f32", not bad, f"{type(m).__name__}, {sum(p.numel() for p in m.parameters())}"
                 f" params; loading problems: {bad or 'none'}")
        hf_merged = hf_logits(m, rows, device)
        del m
        free(device)
    except Exception as e:  # noqa: BLE001
        rep.error(case, "hf-load merged_f32", e)
        return
    try:
        base, _ = load_hf(model, device)
        pm = PeftModel.from_pretrained(base, adapter).eval()
        truth = hf_logits(pm, rows, device)
        del pm, base
        free(device)
        compare(rep, case, "peft base+A~hf merged", hf_merged, truth, "rel_max", F32_TOL)
    except Exception as e:  # noqa: BLE001
        rep.error(case, "peft base+A~hf merged", e)
        truth = None
    for k, label in (("merged_f32", "hf merged~st merged"), ("adapter", "hf merged~st base+A")):
        if k in st:
            compare(rep, case, label, st[k], hf_merged, "rel_max", F32_TOL)
    if "merged_bf16" in merged and truth is not None:
        try:
            m, _ = load_hf(merged["merged_bf16"], device)
            compare(rep, case, "hf bf16merged~peft", hf_logits(m, rows, device), truth, "rel_norm", BF16_TOL)
            del m
            free(device)
        except Exception as e:  # noqa: BLE001
            rep.error(case, "hf bf16merged~peft", e)
    if os.path.exists(os.path.join(model, "tokenizer.json")):
        check_tokenizer(rep, case, model, merged["merged_f32"])


def check_tokenizer(rep, case, model, merged):
    import transformers
    try:
        ref = transformers.AutoTokenizer.from_pretrained(model)(SAMPLE_TEXT)["input_ids"]
    except Exception as e:  # noqa: BLE001 - the base itself does not load: nothing to compare with
        rep.line(case, "tokenizer", True, f"not compared: AutoTokenizer cannot load the base either ({e})")
        return
    try:
        tok = transformers.AutoTokenizer.from_pretrained(merged)
        got = tok(SAMPLE_TEXT)["input_ids"]
        rep.line(case, "tokenizer", got == ref and len(ref) > 0,
                 f"AutoTokenizer({os.path.basename(merged)}): {type(tok).__name__}, {len(got)} ids,"
                 f" {'same' if got == ref else 'DIFFERENT'} ids as the base's")
    except Exception as e:  # noqa: BLE001
        rep.error(case, "tokenizer", e)


def cmd_check(args):
    rep = Report()
    cases = [check_case_numpy(rep, c) for c in args.cases]
    try:
        import torch
    except ImportError as e:
        print(f"transformers not installed: skipped (HF load, PEFT and tokenizer checks; {e})", flush=True)
        torch = None
    if torch is not None:
        import transformers  # with torch present, a missing transformers / peft is an error
        import peft
        device = torch_setup()
        gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
        print(f"HF side: torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}"
              f" on {gpu}", flush=True)
        for c in cases:
            check_case_torch(rep, device, *c)
    print(f"merge_hf_check: {rep.count - rep.fails}/{rep.count} checks ok"
          + ("" if torch is not None else " (torch part skipped)"), flush=True)
    return 1 if rep.fails or rep.count == 0 else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--model", required=True)
    d.add_argument("--train", required=True)
    d.add_argument("--eval", required=True)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--train-rows", type=int, default=16)
    d.add_argument("--train-len", type=int, default=32)
    d.add_argument("--eval-lengths", type=int, nargs="+", default=[9, 31])
    t = sub.add_parser("tokenizer")
    t.add_argument("--src", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--vocab", type=int, required=True)
    c = sub.add_parser("check")
    c.add_argument("cases", nargs="+")
    args = p.parse_args()
    return {"data": cmd_data, "tokenizer": cmd_tokenizer, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
