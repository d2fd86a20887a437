#!/usr/bin/env python3
"""Mutation fuzzing of streamtune's file readers through the CLI (a dev tool, not a CI test).

Every reader treats its input as hostile: a damaged file must end in a clear message and a
non-zero exit, never a signal, a CHECK failure, an uncaught exception or a hang. This script takes
the small fixtures under tests/fixtures, damages one file at a time (byte flips, truncation,
splices, length fields set huge, JSON edits) and runs the command that reads it:

  safetensors model + config.json     logits --model DIR
  PEFT adapter (config + tensors)     logits --model DIR --adapter DIR
  GGUF model                          logits --model F.gguf
  tokenizer.json                      tokenize --model F --text ...
  tokenizer.model (sentencepiece)     tokenize --model DIR --text ... (with a tokenizer_config.json)
  pytorch_model.bin (torch.save zip)  logits --model DIR (a damaged shard of a 2-shard checkpoint)
  train YAML, dataset, checkpoint, store   train (a good run first, then one damaged file)
  alpaca / sharegpt / parquet datasets,    train --preview-data (tokenizes, loads no weights)
  a Jinja chat template, a model tokenizer

A run counts as a finding when the process dies by a signal, exits with a code other than 0, 1 or 2,
prints 'CHECK failed' / 'terminate called' / 'internal error', or runs past the timeout. rc 0 is
fine (a flip inside tensor data changes numbers, not structure). Findings are printed with the
command and the mutant is kept under --keep.

  python3 tools/fuzz_readers.py [--bin build/streamtune] [--n 300] [--seed 1] [--keep /tmp/fuzz]
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
BAD_TEXT = ("CHECK failed", "terminate called", "internal error", "Segmentation", "AddressSanitizer")


def mutate_bytes(data: bytes, rng: random.Random, header_len: int) -> bytes:
    b = bytearray(data)
    kind = rng.choice(["flip_header", "flip_any", "truncate", "splice", "huge_u64", "zero_run"])
    if kind == "flip_header":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(min(len(b), max(16, header_len)))
            b[i] = rng.randrange(256)
    elif kind == "flip_any":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        b = b[: rng.randrange(len(b))]
    elif kind == "splice":
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        k = rng.randrange(len(b))
        b[k:k] = b[i:j]
    elif kind == "huge_u64":
        i = rng.randrange(0, max(1, min(len(b), header_len) - 8))
        v = rng.choice([2**63 - 1, 2**64 - 1, 2**32, 2**31 - 1, 0xFFFFFFFF, len(b) * 1000])
        b[i : i + 8] = struct.pack("<Q", v)
    else:
        i = rng.randrange(len(b))
        b[i : i + rng.randint(1, 64)] = bytes(rng.randint(1, 64))
    return bytes(b)


def json_values(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,), v
            yield from json_values(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:50]):
            yield path + (i,), v
            yield from json_values(v, path + (i,))


def mutate_json(text: str, rng: random.Random) -> str:
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if obj is None or rng.random() < 0.25:  # textual damage
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 3)):
            if not b:  # cut to nothing by an earlier damage
                break
            i = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                del b[i]
            elif op == 1:
                b.insert(i, rng.choice(b'{}[]",:0-9eE\\'))
            else:
                b = b[:i]
        return b.decode(errors="replace")
    paths = list(json_values(obj))
    if not paths:
        return text
    path, _ = rng.choice(paths)
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    choice = rng.randrange(4)
    if choice == 0 and isinstance(parent, dict):
        del parent[key]
    else:
        parent[key] = rng.choice([None, -1, 0, 1, 3, 2**31, 2**63, -2**40, 1e308, -0.0, float("nan"), "x", "",
                                  [], {}, [1, 2], True, "float16", "bfloat16", "int8", [0] * 5])
    return json.dumps(obj, allow_nan=True)


def st_header_len(data: bytes) -> int:
    if len(data) >= 8:
        n = struct.unpack("<Q", data[:8])[0]
        if n < len(data):
            return 8 + n
    return 256


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", ""
    out = p.stdout + p.stderr
    if p.returncode < 0 or p.returncode >= 128:
        return f"signal/rc {p.returncode}", out
    if p.returncode not in (0, 1, 2):  # 2: a config or usage error
        return f"rc {p.returncode}", out
    for t in BAD_TEXT:
        if t in out:
            return f"'{t}'", out
    if p.returncode != 0 and not out.strip():
        return "silent failure", out
    return None, f"rc={p.returncode} " + out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "streamtune"))
    ap.add_argument("--n", type=int, default=300, help="mutants per target")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--keep", default="/tmp/fuzz_findings")
    ap.add_argument("--only", default="", help="comma list of targets")
    ap.add_argument("--verbose", action="store_true", help="print every mutant's last line")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="st_fuzz_")
    os.makedirs(a.keep, exist_ok=True)
    model_src = os.path.join(FIX, "llama_gqa", "model")
    adapter_src = os.path.join(FIX, "llama_gqa", "adapter")
    gguf_src = os.path.join(FIX, "gguf", "tiny_llama.gguf")
    tok_src = os.path.join(FIX, "tokenizers", "qwen2", "tokenizer.json")
    out = os.path.join(work, "out.safetensors")
    logits = [a.bin, "logits", "--device", "cpu", "--ids", "1,2,3,4", "--out", out]

    def copy_with(src, tag, name, mutated):  # a fresh copy of directory src with one file replaced
        d = os.path.join(work, tag)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        with open(os.path.join(d, name), "wb") as f:
            f.write(mutated)
        return d

    def model_dir(name, mutated):
        return copy_with(model_src, "m", name, mutated)

    def adapter_dir(name, mutated):
        return copy_with(adapter_src, "a", name, mutated)

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    targets = {
        "model_safetensors": lambda: (lambda d: logits + ["--model", model_dir("model.safetensors", d)])(
            mutate_bytes(read(os.path.join(model_src, "model.safetensors")), rng,
                         st_header_len(read(os.path.join(model_src, "model.safetensors"))))),
        "config_json": lambda: logits + ["--model", model_dir(
            "config.json", mutate_json(read(os.path.join(model_src, "config.json")).decode(), rng).encode())],
        "adapter_safetensors": lambda: logits + ["--model", model_src, "--adapter", adapter_dir(
            "adapter_model.safetensors",
            mutate_bytes(read(os.path.join(adapter_src, "adapter_model.safetensors")), rng,
                         st_header_len(read(os.path.join(adapter_src, "adapter_model.safetensors")))))],
        "adapter_config": lambda: logits + ["--model", model_src, "--adapter", adapter_dir(
            "adapter_config.json",
            mutate_json(read(os.path.join(adapter_src, "adapter_config.json")).decode(), rng).encode())],
        "gguf": None,
        "tokenizer_json": None,
    }

    def gguf_cmd():
        p = os.path.join(work, "m.gguf")
        with open(p, "wb") as f:
            f.write(mutate_bytes(read(gguf_src), rng, 4096))
        return logits + ["--model", p]

    def tok_cmd():
        p = os.path.join(work, "tokenizer.json")
        with open(p, "w") as f:
            f.write(mutate_json(read(tok_src).decode(), rng))
        return [a.bin, "tokenize", "--model", p, "--text", "Hello, world! 123 <|im_start|> ünïcödé"]

    spm_src = os.path.join(FIX, "tokenizers", "spm_gguf", "tiny_spm.model")

    def spm_cmd():  # a model directory: tokenizer.model damaged, tokenizer_config.json sometimes too
        d = os.path.join(work, "spm")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "tokenizer.model"), "wb") as f:
            f.write(mutate_bytes(read(spm_src), rng, 64))
        cfg = json.dumps({"tokenizer_class": "LlamaTokenizer", "legacy": False, "add_bos_token": True,
                          "bos_token": "<s>", "eos_token": "</s>"})
        if rng.random() < 0.3:
            cfg = mutate_json(cfg, rng)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            f.write(cfg)
        return [a.bin, "tokenize", "--model", d, "--text", "[INST] Hello, world! 123 ünïcödé [/INST]"]

    torch_src = os.path.join(FIX, "torch", "llama_bin")

    def torch_cmd():  # one shard of a PyTorch checkpoint damaged (its pickle sits at the front)
        d = os.path.join(work, "torchbin")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(torch_src, d)
        shard = os.path.join(d, "pytorch_model-00001-of-00002.bin")
        with open(shard, "wb") as f:
            f.write(mutate_bytes(read(os.path.join(torch_src, "pytorch_model-00001-of-00002.bin")), rng, 1400))
        return logits + ["--model", d]

    targets["torch_bin"] = torch_cmd
    targets["gguf"] = gguf_cmd
    targets["tokenizer_json"] = tok_cmd
    targets["tokenizer_model"] = spm_cmd

    # The train family: one good run first (a checkpoint and a cached RAM-tier store to damage).
    tw = os.path.join(work, "t")
    os.makedirs(tw)
    subprocess.run([a.bin, "init-model", "--preset", "tiny-llama", "--out", os.path.join(tw, "model"), "--seed", "1",
                    "--dtype", "float32"], check=True, capture_output=True)
    with open(os.path.join(tw, "data.jsonl"), "w") as f:
        r = random.Random(0)
        for _ in range(24):
            f.write(json.dumps({"input_ids": [r.randrange(3, 512) for _ in range(r.randrange(8, 24))]}) + "\n")
    yaml = ("base_model: model\ndatasets:\n  - path: data.jsonl\n    type: tokenized\ndevice: cpu\ndtype: float32\n"
            "stream: ram\nstream_buffers: 2\nvram_budget: 0\nsequence_len: 24\nmicro_batch_size: 2\n"
            "gradient_accumulation_steps: 2\nmax_steps: 4\nlearning_rate: 1.0e-3\nlora_r: 4\n"
            "lora_target_modules: [q_proj, v_proj]\nsave_steps: 2\nlogging_steps: 1\n")
    with open(os.path.join(tw, "train.yaml"), "w") as f:
        f.write(yaml.replace("vram_budget: 0\n", ""))
    good = [a.bin, "train", os.path.join(tw, "train.yaml"), "--cache_dir=" + os.path.join(tw, "cache")]
    subprocess.run(good + ["--output_dir=" + os.path.join(tw, "good")], check=True, capture_output=True)
    ckpt_files = []
    for root, _, files in os.walk(os.path.join(tw, "good", "checkpoint-2")):
        ckpt_files += [os.path.relpath(os.path.join(root, x), os.path.join(tw, "good")) for x in files]
    store_files = []
    for root, _, files in os.walk(os.path.join(tw, "cache")):
        store_files += [os.path.relpath(os.path.join(root, x), os.path.join(tw, "cache")) for x in files]

    def damage(path):
        data = read(path)
        if path.endswith(".json") or path.endswith(".jsonl") or path.endswith(".yaml"):
            text = data.decode()
            if path.endswith(".jsonl") and rng.random() < 0.7:
                lines = text.splitlines()
                i = rng.randrange(len(lines))
                lines[i] = mutate_json(lines[i], rng)
                text = "\n".join(lines) + "\n"
            elif path.endswith(".yaml"):
                lines = text.splitlines()
                i = rng.randrange(len(lines))
                k = rng.randrange(4)
                if k == 0:
                    del lines[i]
                elif k == 1 and ":" in lines[i]:
                    lines[i] = lines[i].split(":")[0] + ": " + rng.choice(
                        ["-1", "0", "1e30", "abc", "[", "{}", "null", "\"\"", "99999999999999999999", "[1, 2]", "yes"])
                else:
                    b = bytearray(lines[i].encode())
                    if b:
                        b[rng.randrange(len(b))] = rng.choice(b":-[]{}'\"#&*!|> \t0x")
                    lines[i] = b.decode(errors="replace")
                text = "\n".join(lines) + "\n"
            else:
                text = mutate_json(text, rng)
            data = text.encode()
        else:
            data = mutate_bytes(data, rng, st_header_len(data) if path.endswith(".safetensors") else 256)
        with open(path, "wb") as f:
            f.write(data)

    def fresh(name):
        d = os.path.join(work, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(tw, d)
        return d

    def train_cmd(d, extra=()):
        return [a.bin, "train", os.path.join(d, "train.yaml"), "--cache_dir=" + os.path.join(d, "cache"),
                "--output_dir=" + os.path.join(d, "run")] + list(extra)

    def yaml_cmd():
        d = fresh("ty")
        damage(os.path.join(d, "train.yaml"))
        return train_cmd(d)

    def data_cmd():
        d = fresh("td")
        damage(os.path.join(d, "data.jsonl"))
        return train_cmd(d)

    def resume_cmd():
        d = fresh("tr")
        shutil.copytree(os.path.join(d, "good"), os.path.join(d, "run"))
        shutil.rmtree(os.path.join(d, "run", "checkpoint-4"), ignore_errors=True)
        damage(os.path.join(d, "run", rng.choice(ckpt_files)))
        return train_cmd(d, ["--resume_from_checkpoint=" + os.path.join(d, "run", "checkpoint-2")])

    def store_cmd():
        d = fresh("ts")
        damage(os.path.join(d, "cache", rng.choice(store_files)))
        return train_cmd(d)

    targets.update({"train_yaml": yaml_cmd, "train_data": data_cmd, "train_resume": resume_cmd, "train_store": store_cmd})

    # Datasets and chat templates through --preview-data (tokenizes without loading weights).
    pw = os.path.join(work, "p")
    os.makedirs(pw)
    subprocess.run([a.bin, "init-model", "--preset", "tiny-llama", "--out", os.path.join(pw, "model"), "--seed", "1"],
                   check=True, capture_output=True)
    shutil.copy(os.path.join(FIX, "gguf", "tiny_tokenizer.json"), os.path.join(pw, "model", "tokenizer.json"))
    shutil.copy(os.path.join(FIX, "parquet", "chat.parquet"), os.path.join(pw, "chat.parquet"))
    shutil.copy(os.path.join(FIX, "parquet", "ids.parquet"), os.path.join(pw, "ids.parquet"))
    shutil.copy(os.path.join(FIX, "chat", "llama3.jinja"), os.path.join(pw, "t.jinja"))
    shutil.copy(os.path.join(FIX, "csv", "alpaca.csv"), os.path.join(pw, "alpaca.csv"))
    shutil.copy(os.path.join(FIX, "arrow", "saved", "data-00000-of-00001.arrow"), os.path.join(pw, "saved.arrow"))
    with open(os.path.join(pw, "alpaca.json"), "w") as f:
        json.dump([{"instruction": "say hi", "input": "", "output": "hi there"},
                   {"instruction": "add", "input": "1 1", "output": "2"}], f)
    with open(os.path.join(pw, "sg.jsonl"), "w") as f:
        for i in range(4):
            f.write(json.dumps({"conversations": [{"from": "human", "value": f"q{i}"},
                                                  {"from": "gpt", "value": f"a{i}"}]}) + "\n")
    with open(os.path.join(pw, "t.yaml"), "w") as f:
        f.write("base_model: model\ndatasets:\n  - path: alpaca.json\n    type: alpaca\n"
                "  - path: sg.jsonl\n    type: sharegpt\n  - path: chat.parquet\n    type: chat_template\n"
                "  - path: ids.parquet\n    type: tokenized\n  - path: alpaca.csv\n    type: alpaca\n"
                "  - path: saved.arrow\n    type: alpaca\nchat_template: t.jinja\ndevice: cpu\n"
                "sequence_len: 512\noutput_dir: out\n")
    probe = subprocess.run([a.bin, "train", os.path.join(pw, "t.yaml"), "--preview-data=1"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("preview fixture does not run:", probe.stdout + probe.stderr)
        return 1

    def preview_cmd(name):
        def make():
            d = os.path.join(work, "pv")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(pw, d)
            path = os.path.join(d, name)
            if name.endswith(".jinja"):  # template text: byte damage or a line dropped
                text = read(path).decode()
                lines = text.splitlines()
                if rng.random() < 0.5 and lines:
                    del lines[rng.randrange(len(lines))]
                    data = "\n".join(lines).encode()
                else:
                    b = bytearray(text.encode())
                    for _ in range(rng.randint(1, 3)):
                        b[rng.randrange(len(b))] = rng.choice(b"{}%#-+|()[]'\"~ .,:=!<>0a")
                    data = bytes(b)
                with open(path, "wb") as f:
                    f.write(data)
            else:
                damage(path)
            return [a.bin, "train", os.path.join(d, "t.yaml"), "--preview-data=2"]
        return make

    # The model's own chat template files (tokenizer.cc Note [chat template files]): a damaged
    # chat_template.jinja, additional_chat_templates/tool_use.jinja or list-form tokenizer_config.json.
    with open(os.path.join(pw, "own.yaml"), "w") as f:
        f.write("base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\ndevice: cpu\n"
                "sequence_len: 512\noutput_dir: out\n")
    chatml = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

    def own_template_cmd():
        d = os.path.join(work, "po")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(pw, d)
        m = os.path.join(d, "model")
        which = rng.randrange(3)
        if which == 0:
            path = os.path.join(m, "chat_template.jinja")
            data = chatml.encode()
        elif which == 1:
            os.makedirs(os.path.join(m, "additional_chat_templates"))
            path = os.path.join(m, "additional_chat_templates", rng.choice(["tool_use.jinja", "default.jinja"]))
            data = chatml.encode()
        else:
            path = os.path.join(m, "tokenizer_config.json")
            data = json.dumps({"chat_template": [{"name": "default", "template": chatml},
                                                 {"name": "tool_use", "template": chatml}]}).encode()
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.choice(b"{}%#-+|()[]'\"~ .,:=!<>0a\xff\x80")
        with open(path, "wb") as f:
            f.write(bytes(b))
        return [a.bin, "train", os.path.join(d, "own.yaml"), "--preview-data=1"]

    targets["model_chat_templates"] = own_template_cmd

    # Preference pairs (rl; data/preference.h): byte damage, or one field of one record given
    # a value of another shape (a reply as a number, a user turn, null, a list of lists, ...).
    pairs = [{"messages": [{"role": "user", "content": f"q{i}"}], "chosen": {"role": "assistant", "content": f"a{i}"},
              "rejected": f"not a{i}"} for i in range(3)]
    pairs.append({"system": "s", "question": "q", "chosen": "a", "rejected": "b"})
    pairs.append({"prompt": [{"role": "user", "content": "q"}], "chosen": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "a"}], "rejected": [{"role": "assistant", "content": "b"}]})
    pairs.append({"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],  # implicit prompt
                  "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}]})
    with open(os.path.join(pw, "pairs.jsonl"), "w") as f:
        for r in pairs[:3] + pairs[4:]:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(pw, "intel.jsonl"), "w") as f:
        f.write(json.dumps(pairs[3]) + "\n")
    with open(os.path.join(pw, "argilla_chat.jsonl"), "w") as f:
        f.write(json.dumps(pairs[-1]) + "\n")
    with open(os.path.join(pw, "pref.yaml"), "w") as f:
        f.write("base_model: model\nrl: dpo\ndatasets:\n  - path: pairs.jsonl\n    type: chat_template\n"
                "  - path: intel.jsonl\n    type: chatml.intel\n  - path: argilla_chat.jsonl\n"
                "    type: chatml.argilla_chat\nchat_template: chatml\ndevice: cpu\n"
                "sequence_len: 512\noutput_dir: out\n")
    shapes = [None, 1, [], {}, "", [{"role": "user", "content": "x"}], [[1]], {"role": "user", "content": "x"},
              {"content": None}, [{"role": "assistant"}]]

    def record_mutant_cmd(yaml_name, files, values):
        """Damages one of `files` (bytes) or sets one field of one record to one of `values`."""
        def cmd():
            d = os.path.join(work, "pp")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(pw, d)
            path = os.path.join(d, rng.choice(files))
            if rng.random() < 0.5:
                damage(path)
            else:
                recs = [json.loads(l) for l in read(path).decode().splitlines() if l.strip()]
                r = rng.choice(recs)
                r[rng.choice(sorted(r))] = rng.choice(values)
                with open(path, "w") as f:
                    f.write("".join(json.dumps(x) + "\n" for x in recs))
            return [a.bin, "train", os.path.join(d, yaml_name), "--preview-data=2"]
        return cmd

    preference_cmd = record_mutant_cmd("pref.yaml", ["pairs.jsonl", "intel.jsonl", "argilla_chat.jsonl"], shapes)

    targets["data_preference"] = preference_cmd

    # KTO's unpaired examples (rl: kto; data/preference.h Note [unpaired records]): the same damage.
    unpaired = [{"prompt": [{"role": "user", "content": f"q{i}"}], "completion": [{"role": "assistant", "content": f"a{i}"}],
                 "label": i % 2 == 0} for i in range(3)]
    unpaired.append({"prompt": "q", "completion": "a", "label": False})
    with open(os.path.join(pw, "kto.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in unpaired))
    with open(os.path.join(pw, "kto_intel.jsonl"), "w") as f:
        f.write(json.dumps({"system": "s", "question": "q", "completion": "a", "label": True}) + "\n")
    with open(os.path.join(pw, "kto_argilla_chat.jsonl"), "w") as f:
        f.write(json.dumps({"completion": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                            "label": True}) + "\n")
    with open(os.path.join(pw, "kto.yaml"), "w") as f:
        f.write("base_model: model\nrl: kto\nmicro_batch_size: 2\ndatasets:\n  - path: kto.jsonl\n    type: chat_template\n"
                "  - path: kto_intel.jsonl\n    type: chatml.intel\n  - path: kto_argilla_chat.jsonl\n"
                "    type: chatml.argilla_chat\nchat_template: chatml\ndevice: cpu\nsequence_len: 512\noutput_dir: out\n")

    unpaired_cmd = record_mutant_cmd("kto.yaml", ["kto.jsonl", "kto_intel.jsonl", "kto_argilla_chat.jsonl"],
                                     shapes + ["yes", 0])

    targets["data_unpaired"] = unpaired_cmd
    targets.update({"data_alpaca": preview_cmd("alpaca.json"), "data_sharegpt": preview_cmd("sg.jsonl"),
                    "data_parquet_chat": preview_cmd("chat.parquet"), "data_parquet_ids": preview_cmd("ids.parquet"),
                    "data_csv": preview_cmd("alpaca.csv"), "data_arrow": preview_cmd("saved.arrow"),
                    "chat_template": preview_cmd("t.jinja"), "tokenizer_in_model": preview_cmd("model/tokenizer.json")})
    only = set(filter(None, a.only.split(",")))
    findings = 0
    for name, make in targets.items():
        if only and name not in only:
            continue
        counts = {}
        for i in range(a.n):
            cmd = make()
            bad, text = run(cmd, a.timeout)
            if bad:
                findings += 1
                keep = os.path.join(a.keep, f"{name}_{i}")
                shutil.rmtree(keep, ignore_errors=True)
                os.makedirs(keep)
                for x in cmd:
                    if x.startswith(work) and os.path.exists(x):
                        (shutil.copytree if os.path.isdir(x) else shutil.copy)(x, os.path.join(keep, os.path.basename(x)))
                print(f"FINDING {name} #{i}: {bad}\n  cmd: {' '.join(cmd)}\n  kept: {keep}\n  "
                      + "\n  ".join(text.strip().splitlines()[-4:]), flush=True)
            else:
                key = text.split(" ", 1)[0]
                counts[key] = counts.get(key, 0) + 1
                if a.verbose:
                    print(f"  {name} #{i}: {text.strip().splitlines()[-1][:160] if text.strip() else ''}")
        print(f"{name}: {a.n} mutants, outcomes {counts}, findings so far {findings}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
