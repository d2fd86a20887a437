#!/usr/bin/env python3
"""Writes the reference fixtures under tests/fixtures/<name>/ with PyTorch + transformers + PEFT.

Needs torch, transformers 5.x, peft and safetensors (run on the device machine; not installed on
the CI machine). Everything is float32 on the CPU, eager attention, one thread, seeded, so the
numbers are reproducible. See tests/fixtures/README.md for what each file holds.

Usage: PYTHONHASHSEED=0 python3 tools/ref/make_goldens.py [--out tests/fixtures]
"""
import argparse
import json
import os
import sys

import torch

TRAIN = {
    "learning_rate": 1e-3,
    "lr_scheduler": "constant",
    "warmup_steps": 0,
    "weight_decay": 0.01,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "max_grad_norm": 1.0,
    "micro_batch_size": 1,
    "gradient_accumulation_steps": 2,
    "max_steps": 8,
    "shuffle": False,
    "lora_r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
}

ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# The untied Qwen2 of the DoRA and LoRA+ fixtures (q/k/v biases, no sliding window).
QWEN2_UNTIED = {
    "architectures": ["Qwen2ForCausalLM"],
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False,
    "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05, "rope_theta": 1000000.0,
}

# name -> (model_type, config.json-style dict, LoRA target modules, seed)
MODELS = {
    "llama_gqa": ("llama", {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False,
        "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05,
        # v4 spelling: the path every hub config takes, so transformers 5 must accept it.
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
    }, ALL_LINEAR, 1001),
    "qwen2_tied": ("qwen2", {
        "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "use_sliding_window": False,
        "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05, "rope_theta": 1000000.0,
    }, ["q_proj", "v_proj"], 1002),
    "qwen3_qknorm": ("qwen3", {
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "attention_bias": False, "use_sliding_window": False,
        "bos_token_id": 1, "eos_token_id": [2, 3], "initializer_range": 0.05, "rope_theta": 1000000.0,
    }, ["q_proj", "k_proj", "v_proj", "o_proj"], 1003),
    # Sliding-window attention: every layer (Mistral), and only layers >= max_window_layers (Qwen2).
    # Windows shorter than the rows (7-17 tokens), so the masks matter.
    "mistral_swa": ("mistral", {
        "architectures": ["MistralForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": 5,
        "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05, "rope_theta": 10000.0,
    }, ALL_LINEAR, 1004),
    "qwen2_swa": ("qwen2", {
        "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "use_sliding_window": True,
        "sliding_window": 4, "max_window_layers": 1,
        "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05, "rope_theta": 1000000.0,
    }, ["q_proj", "v_proj"], 1005),
    # DoRA (use_dora) on all seven linears of a Qwen2 (q/k/v biases, the residual adds of o/down):
    # the magnitudes are perturbed away from the row norms so that m matters.
    "qwen2_dora": ("qwen2", dict(QWEN2_UNTIED), ALL_LINEAR, 1006, {"use_dora": True}),
    # LoRA+ (PEFT's create_loraplus_optimizer: B and every 1-D parameter at lr x ratio, A at lr), with
    # DoRA so that the magnitudes' group is exercised too; the qwen2_dora model under another seed.
    "qwen2_loraplus": ("qwen2", dict(QWEN2_UNTIED), ALL_LINEAR, 1007, {"use_dora": True, "loraplus_lr_ratio": 16.0}),
    # layers_to_transform: the adapter on layers 0 and 2 of three (layer 1's linears run plain), PEFT
    # finding the index in the module names by its default pattern.
    "llama_layers": ("llama", {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False,
        "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.05, "rope_theta": 500000.0,
    }, ALL_LINEAR, 1008, {"layers_to_transform": [0, 2]}),
}
# Keys of a fixture's extras that configure the optimizer, not the LoraConfig.
OPTIMIZER_KEYS = ("loraplus_lr_ratio",)

ROW_LENGTHS = [13, 17, 9, 11, 15, 7]
LABELLED_ROW = 3  # this row carries explicit labels with -100 on its first 4 targets


def log(*a):
    print(*a, flush=True)


def make_rows(seed, vocab):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i, n in enumerate(ROW_LENGTHS):
        ids = torch.randint(3, vocab, (n,), generator=g).tolist()
        ids[0] = 1  # bos
        row = {"input_ids": ids}
        if i == LABELLED_ROW:
            row["labels"] = [-100] * 4 + ids[4:]
        rows.append(row)
    return rows


def plain_inv_freq(theta, dim):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_buffer(model):
    for n, b in model.named_buffers():
        if n.endswith("inv_freq") and "original" not in n:
            return b.detach().clone().float().contiguous()
    raise RuntimeError("no inv_freq buffer found")


def rope_ok(model, cfg_dict):
    """True when the built model uses the RoPE the fixture asks for (theta, llama3 scaling)."""
    dim = cfg_dict.get("head_dim") or cfg_dict["hidden_size"] // cfg_dict["num_attention_heads"]
    inv = rope_buffer(model)
    plain = plain_inv_freq(cfg_dict["rope_theta"], dim)
    if "rope_scaling" in cfg_dict:
        return inv.shape == plain.shape and bool((inv < plain).any()) and inv[0].item() == plain[0].item()
    return inv.shape == plain.shape and torch.allclose(inv, plain, rtol=1e-5, atol=0)


def make_model(model_type, cfg_dict, seed):
    """Builds the config from the v4 spelling (as hub files have it); falls back to v5's
    rope_parameters if this transformers version ignored the legacy keys."""
    import transformers
    legacy = dict(cfg_dict)
    v5 = {k: v for k, v in cfg_dict.items() if k not in ("rope_theta", "rope_scaling")}
    v5["rope_parameters"] = dict(cfg_dict.get("rope_scaling") or {"rope_type": "default"},
                                 rope_theta=cfg_dict["rope_theta"])
    first = None
    for attempt in (legacy, v5):
        torch.manual_seed(seed)
        config = transformers.AutoConfig.for_model(model_type, **attempt)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
        if rope_ok(model, cfg_dict):
            return model, True
        log("WARNING rope check failed with keys", sorted(attempt), "->", rope_buffer(model).tolist())
        if first is None:
            first = model
    return first, False  # still write the fixture; trace.json records rope_check false


def check_reload(model_dir, adapter_dir, ids, want):
    """Reloads the saved base + adapter the way a user would and compares logits."""
    import transformers
    from peft import PeftModel
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").float()
    pm = PeftModel.from_pretrained(base, adapter_dir).eval()
    with torch.no_grad():
        got = pm(input_ids=ids).logits[0].float()
    diff = (got - want).abs().max().item()
    if not diff < 1e-5:
        log("WARNING reloaded logits differ by", diff)
    return diff


def perturb_base(model, seed):
    """Non-trivial norms and biases, so a reader that ignores one of them fails the goldens."""
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # every RMSNorm incl. q_norm / k_norm
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def lora_params(model):
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def peft_name(param_name):
    # "…q_proj.lora_A.default.weight" -> "…q_proj.lora_A.weight" (PEFT strips the adapter name on save);
    # DoRA's "…q_proj.lora_magnitude_vector.default.weight" is saved as "…q_proj.lora_magnitude_vector".
    n = param_name.replace(".default.", ".")
    if n.endswith(".lora_magnitude_vector.weight"):
        n = n[: -len(".weight")]
    return n


def batch(row):
    ids = torch.tensor([row["input_ids"]], dtype=torch.long)
    labels = torch.tensor([row.get("labels", row["input_ids"])], dtype=torch.long)
    return ids, labels


def sliding_window_facts(model_dir, cfg_dict, ids):
    """What transformers made of the window: the per-layer types, and how far the base logits move
    when the same weights run with full attention (> 0: the fixture exercises the mask)."""
    import transformers
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").float().eval()
    full_cfg = transformers.AutoConfig.from_pretrained(model_dir)
    full_cfg.sliding_window = None
    if hasattr(full_cfg, "use_sliding_window"):
        full_cfg.use_sliding_window = False
    if getattr(full_cfg, "layer_types", None):
        full_cfg.layer_types = ["full_attention"] * full_cfg.num_hidden_layers
    full = transformers.AutoModelForCausalLM.from_pretrained(model_dir, config=full_cfg,
                                                             attn_implementation="eager").float().eval()
    with torch.no_grad():
        a = base(input_ids=ids).logits[0]
        b = full(input_ids=ids).logits[0]
    facts = {"layer_types": list(getattr(base.config, "layer_types", None) or []),
             "config_sliding_window": getattr(base.config, "sliding_window", None),
             "full_attention_logits_max_abs_diff": (a - b).abs().max().item()}
    log("sliding window:", facts)
    assert facts["full_attention_logits_max_abs_diff"] > 0, "the window changes nothing: rows too short?"
    return facts


def build(name, out_root):
    import transformers
    from peft import LoraConfig, get_peft_model
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    model_type, cfg_dict, targets, seed = MODELS[name][:4]
    extra = MODELS[name][4] if len(MODELS[name]) > 4 else {}
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    model, rope_check = make_model(model_type, cfg_dict, seed)
    perturb_base(model, seed)
    inv_freq = rope_buffer(model)
    model_dir = os.path.join(out, "model")
    model.save_pretrained(model_dir)

    rows = make_rows(seed + 1, cfg_dict["vocab_size"])
    with open(os.path.join(out, "data.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

    lora_extra = {k: v for k, v in extra.items() if k not in OPTIMIZER_KEYS}
    lcfg = LoraConfig(r=TRAIN["lora_r"], lora_alpha=TRAIN["lora_alpha"], lora_dropout=TRAIN["lora_dropout"],
                      target_modules=list(targets), bias="none", task_type="CAUSAL_LM", **lora_extra)
    torch.manual_seed(seed + 2)
    pm = get_peft_model(model, lcfg)
    g = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))  # B != 0: the adapter changes logits
            elif "lora_magnitude_vector" in n:
                p.mul_(1.0 + 0.1 * torch.randn(p.shape, generator=g))  # m != ||W + s B A||
    pm.save_pretrained(os.path.join(out, "adapter"))
    params = lora_params(pm)
    assert params and all("lora_" in n for n, _ in params), [n for n, _ in params]
    log(name, "trainable:", [n for n, _ in params][:4], "saved:", sorted(get_peft_model_state_dict(pm))[:4])

    expected = {"rope_inv_freq": inv_freq.contiguous()}
    pm.eval()  # dropout is 0 anyway; eval() keeps it explicit
    ids0, labels0 = batch(rows[0])
    with torch.no_grad():
        expected["logits"] = pm(input_ids=ids0).logits[0].float().contiguous()
        with pm.disable_adapter():
            expected["base_logits"] = pm(input_ids=ids0).logits[0].float().contiguous()
    assert not torch.equal(expected["logits"], expected["base_logits"]), "adapter has no effect"
    # Gradient of the first micro-batch's (unscaled) loss.
    pm.zero_grad(set_to_none=True)
    loss0 = pm(input_ids=ids0, labels=labels0).loss
    loss0.backward()
    for n, p in params:
        expected[peft_name(n)] = p.grad.detach().clone().contiguous()
    pm.zero_grad(set_to_none=True)
    save_file(expected, os.path.join(out, "expected.safetensors"), metadata={"format": "pt"})

    window_facts = sliding_window_facts(model_dir, cfg_dict, ids0) if "sliding_window" in cfg_dict else None
    trace = train(pm, params, rows, extra.get("loraplus_lr_ratio"))
    final = {k: v.detach().clone().contiguous() for k, v in get_peft_model_state_dict(pm).items()}
    save_file(final, os.path.join(out, "final_adapter.safetensors"), metadata={"format": "pt"})
    trace.update({
        "fixture": name,
        "model_type": model_type,
        "config": dict(TRAIN, lora_target_modules=list(targets), **extra),
        "first_microbatch_loss": loss0.item(),
        "sliding_window": window_facts,
        "logits_row": 0,
        "rope_check": rope_check,
        "seed": seed,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": __import__("peft").__version__},
    })
    trace["reload_logits_max_abs_diff"] = check_reload(model_dir, os.path.join(out, "adapter"), ids0,
                                                       expected["logits"])
    with open(os.path.join(out, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
    log(name, "loss0", loss0.item(), "steps", [round(s["loss"], 6) for s in trace["steps"]])


def make_optimizer(pm, ps, loraplus_lr_ratio):
    kw = dict(lr=TRAIN["learning_rate"], betas=(TRAIN["adam_beta1"], TRAIN["adam_beta2"]), eps=TRAIN["adam_epsilon"],
              weight_decay=TRAIN["weight_decay"], foreach=False)
    if not loraplus_lr_ratio:
        return torch.optim.AdamW(ps, **kw), None
    import inspect
    from peft.optimizers import create_loraplus_optimizer
    if "optimizer_kwargs" in inspect.signature(create_loraplus_optimizer).parameters:
        opt = create_loraplus_optimizer(model=pm, optimizer_cls=torch.optim.AdamW, optimizer_kwargs=kw,
                                        loraplus_lr_ratio=loraplus_lr_ratio)
    else:  # PEFT 0.21: the optimizer's kwargs inline; the groups' weight decay is loraplus_weight_decay
        # (default 0): given as weight_decay, every group decays as axolotl's LoRA+ does
        opt = create_loraplus_optimizer(model=pm, optimizer_cls=torch.optim.AdamW, loraplus_lr_ratio=loraplus_lr_ratio,
                                        loraplus_weight_decay=kw["weight_decay"], **kw)
    names = {id(p): n for n, p in pm.named_parameters()}
    groups = [{"lr": g["lr"], "weight_decay": g["weight_decay"], "params": sorted(names[id(p)] for p in g["params"])}
              for g in opt.param_groups if g["params"]]
    log("loraplus groups:", [(g["lr"], len(g["params"])) for g in groups])
    return opt, groups


def train(pm, params, rows, loraplus_lr_ratio=None):
    pm.train()
    ps = [p for _, p in params]
    opt, groups = make_optimizer(pm, ps, loraplus_lr_ratio)
    accum = TRAIN["gradient_accumulation_steps"]
    steps, k = [], 0
    for step in range(TRAIN["max_steps"]):
        micro, used = [], []
        for _ in range(accum):
            ri = k % len(rows)
            k += 1
            ids, labels = batch(rows[ri])
            loss = pm(input_ids=ids, labels=labels).loss
            (loss / accum).backward()
            micro.append(loss.item())
            used.append(ri)
        gn = torch.nn.utils.clip_grad_norm_(ps, TRAIN["max_grad_norm"], foreach=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.append({"step": step + 1, "loss": sum(micro) / len(micro), "micro_losses": micro,
                      "rows": used, "grad_norm": gn.item(), "learning_rate": TRAIN["learning_rate"]})
    pm.eval()
    out = {"steps": steps}
    if groups is not None:
        out["optimizer_groups"] = groups
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--only", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    failed = []
    for name in a.only:
        try:
            build(name, a.out)
        except Exception as e:  # keep going: one broken fixture should not cost the others
            import traceback
            traceback.print_exc()
            failed.append(name)
            log("FAILED", name, repr(e))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
