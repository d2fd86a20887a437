#!/usr/bin/env python3
# Mutation fuzz of streamtune's file readers through the CLI (safetensors model + config.json, PEFT
# adapter + adapter_config.json, tokenizer.json, GGUF models, dataset files in JSON, Parquet and
# gzip): truncations, byte flips, extreme 8-byte fields, inserted junk, damaged digits. Every run
# must exit 0 or with a clear error (rc 1/2 and a message on stderr), never a signal or a hang;
# offending inputs are kept in /tmp/fz.
#   python3 tools/fuzz/fuzz_readers.py build/streamtune [N per file] [seed]
import os, random, shutil, subprocess, sys, json
ST = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 60
FX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures")
W = "/tmp/fz/w"
os.makedirs("/tmp/fz", exist_ok=True)
rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
bad = []

def mutate(data):
    data = bytearray(data)
    k = rnd.randrange(6)
    if k == 0 and len(data) > 1:  # truncate
        return bytes(data[:rnd.randrange(len(data))])
    if k == 1:  # flip bytes in the first 4 KiB (headers)
        for _ in range(rnd.randint(1, 8)):
            i = rnd.randrange(min(len(data), 4096)); data[i] = rnd.randrange(256)
        return bytes(data)
    if k == 2:  # flip anywhere
        for _ in range(rnd.randint(1, 16)):
            i = rnd.randrange(len(data)); data[i] = rnd.randrange(256)
        return bytes(data)
    if k == 3:  # 8-byte field set to an extreme
        i = rnd.randrange(max(1, min(len(data) - 8, 4096)))
        data[i:i + 8] = rnd.choice([b"\xff" * 8, b"\x00" * 8, (2**62).to_bytes(8, "little"), (2**31 - 1).to_bytes(8, "little")])
        return bytes(data)
    if k == 4:  # insert junk
        i = rnd.randrange(len(data) + 1)
        return bytes(data[:i] + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64))) + data[i:])
    # digits replaced (JSON numbers, shapes)
    s = bytes(data)
    idx = [i for i, c in enumerate(s[:8192]) if 48 <= c <= 57]
    for _ in range(min(4, len(idx))):
        i = rnd.choice(idx); data[i] = rnd.choice(b"0123456789-")
    return bytes(data)

def run(cmd, what):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        bad.append((what, "TIMEOUT", " ".join(cmd))); return
    err = p.stderr.decode(errors="replace").strip().splitlines()
    if p.returncode < 0 or p.returncode > 2 or (p.returncode != 0 and not err):
        bad.append((what, p.returncode, (err[-3:] if err else []), " ".join(cmd)))

def case_dir(src, victim, cmd_of):
    for it in range(N):
        d = W + "/m"
        shutil.rmtree(d, ignore_errors=True); shutil.copytree(src, d)
        path = os.path.join(d, victim)
        raw = open(path, "rb").read(); open(path, "wb").write(mutate(raw))
        run(cmd_of(d), "%s/%s #%d" % (os.path.basename(src), victim, it))
        if bad and bad[-1][0].endswith("#%d" % it):
            keep = "/tmp/fz/crash_%d_%s" % (len(bad), victim.replace("/", "_")); shutil.copy(path, keep)

os.makedirs(W, exist_ok=True)
out = W + "/o.safetensors"
q2 = FX + "/qwen2_tied"
logits = lambda d: [ST, "logits", "--model", d + "/model", "--ids", "1,2,3", "--out", out, "--device", "cpu"]
case_dir(q2, "model/model.safetensors", logits)
case_dir(q2, "model/config.json", logits)
if os.path.exists(q2 + "/model/tokenizer.json"):
    case_dir(q2, "model/tokenizer.json", lambda d: [ST, "tokenize", "--model", d + "/model", "--text", "hello world"])
ad = lambda d: [ST, "logits", "--model", q2 + "/model", "--adapter", d + "/adapter", "--ids", "1,2,3", "--out", out, "--device", "cpu"]
case_dir(q2, "adapter/adapter_model.safetensors", ad)
case_dir(q2, "adapter/adapter_config.json", ad)
# A DoRA adapter (lora_magnitude_vector tensors, use_dora) on its own base.
qd = FX + "/qwen2_dora"
add = lambda d: [ST, "logits", "--model", qd + "/model", "--adapter", d + "/adapter", "--ids", "1,2,3", "--out", out, "--device", "cpu"]
case_dir(qd, "adapter/adapter_model.safetensors", add)
case_dir(qd, "adapter/adapter_config.json", add)
g = W + "/g"; os.makedirs(g, exist_ok=True)
for name in ["tiny_llama.gguf", "tiny_qwen3.gguf", "tiny_qwen3_yarn.gguf"]:
    for it in range(N):
        data = mutate(open(FX + "/gguf/" + name, "rb").read())
        p = g + "/" + name; open(p, "wb").write(data)
        run([ST, "logits", "--model", p, "--ids", "1,2,3", "--out", out, "--device", "cpu"], "%s #%d" % (name, it))
        if bad and bad[-1][0] == "%s #%d" % (name, it): shutil.copy(p, "/tmp/fz/crash_%d_%s" % (len(bad), name))
        run([ST, "tokenize", "--model", p, "--text", "hello world"], "%s tok #%d" % (name, it))
tj = FX + "/gguf/tiny_tokenizer.json"
for it in range(N):
    p = g + "/tokenizer.json"; raw = open(tj, "rb").read(); open(p, "wb").write(mutate(raw))
    run([ST, "tokenize", "--model", p, "--text", "hello world"], "tiny_tokenizer.json #%d" % it)
    if bad and bad[-1][0] == "tiny_tokenizer.json #%d" % it: shutil.copy(p, "/tmp/fz/crash_%d_tokenizer.json" % len(bad))
# Dataset files through `train` (a tiny random model with the fixture tokenizer): every record type.
d = W + "/ds"
shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
subprocess.run([ST, "init-model", "--preset", "tiny-llama", "--out", d + "/model", "--seed", "1"], capture_output=True, check=True)
shutil.copy(FX + "/gguf/tiny_tokenizer.json", d + "/model/tokenizer.json")
sets = {
    "alpaca": json.dumps([{"instruction": "say hi %d" % i, "input": "" if i % 2 else "ctx", "output": "hi there"} for i in range(6)]),
    "sharegpt": "\n".join(json.dumps({"conversations": [{"from": "human", "value": "q%d" % i}, {"from": "gpt", "value": "a"}]}) for i in range(6)),
    "input_output": "\n".join(json.dumps({"segments": [{"text": "q%d " % i, "label": False}, {"text": "a", "label": True}]}) for i in range(6)),
    "prompt_completion": "\n".join(json.dumps({"prompt": "q%d" % i, "completion": " a"}) for i in range(6)),
}
def train_on(name, data, typ, what):
    open(d + "/" + name, "wb").write(data)
    open(d + "/t.yaml", "w").write("base_model: model\ndatasets:\n  - path: %s\n    type: %s\nchat_template: chatml\n"
                                   "device: cpu\ndtype: float32\nstream: \"off\"\nsequence_len: 512\nmicro_batch_size: 2\n"
                                   "max_steps: 1\nlora_r: 4\noutput_dir: out\n" % (name, typ))
    run([ST, "train", d + "/t.yaml"], what)
    if bad and bad[-1][0] == what: shutil.copy(d + "/" + name, "/tmp/fz/crash_%d_%s" % (len(bad), name))
for typ, body in sets.items():
    for it in range(N // 2):
        train_on("data.json", mutate(body.encode()), typ, "dataset %s #%d" % (typ, it))
# Parquet and gzip dataset files (the Parquet reader's fixtures), through the same `train`.
for name, typ in [("chat.parquet", "messages"), ("messages_zstd_v2.parquet", "messages"), ("ids.parquet", "tokenized"),
                  ("types_split_v2.parquet", "text"), ("chat.jsonl.gz", "messages"), ("chat.parquet.gz", "messages"),
                  ("messages_lz4_v2.parquet", "messages"), ("messages_brotli_v1.parquet", "messages")]:
    raw = open(FX + "/parquet/" + name, "rb").read()
    for it in range(N // 2):
        train_on(name, mutate(raw), typ, "dataset %s #%d" % (name, it))
print("bad:", len(bad))
for b in bad: print(b)
