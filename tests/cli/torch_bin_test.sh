#!/usr/bin/env bash
# PyTorch checkpoints end to end (io/torch_zip.h). Fixtures from torch 2.11
# (tools/ref/make_torch_bin_fixture.py): a tiny Llama (bf16) as two pytorch_model-0000i-of-00002.bin
# shards + index, a tiny Qwen2 (f16, tied embeddings, biases) as one pytorch_model.bin, and both
# as model.safetensors. Oracles: `logits` from each .bin directory byte-equal to the safetensors
# one; `train` from the .bin directory; an adapter_model.bin (PEFT's format before safetensors,
# written here the way torch.save lays it out) gives the logits its safetensors twin gives.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_torch_XXXXXX)
trap 'rm -rf "$T"' EXIT
FIX=tests/fixtures/torch
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

for m in llama qwen; do
  for f in bin st; do
    out=$("$BIN" logits --model "$FIX/${m}_$f" --ids 1,2,3,400,5,77 --device cpu --dtype float32 --out "$T/${m}_$f.safetensors" 2>&1) ||
      bad "logits ${m}_$f: $out"
  done
  cmp -s "$T/${m}_bin.safetensors" "$T/${m}_st.safetensors" && ok "$m: logits from the .bin checkpoint equal the safetensors one's" ||
    bad "$m: logits differ between .bin and safetensors"
done

python3 - "$T/data.jsonl" <<'PY'
import json, random, sys
r = random.Random(0)
with open(sys.argv[1], "w") as f:
    for _ in range(8):
        f.write(json.dumps({"input_ids": [r.randrange(512) for _ in range(20)]}) + "\n")
PY
cp -r "$FIX/llama_bin" "$T/model"
printf 'base_model: model\ndatasets:\n  - path: data.jsonl\n    type: tokenized\ndevice: cpu\ndtype: float32\nsequence_len: 24\nmicro_batch_size: 2\nmax_steps: 2\nlearning_rate: 1.0e-2\nlora_r: 4\noutput_dir: out\n' >"$T/t.yaml"
out=$(cd "$T" && "$BIN" train t.yaml 2>&1); rc=$?
[[ $rc -eq 0 && -f "$T/out/adapter_model.safetensors" ]] && ok "train from a pytorch_model.bin checkpoint" || bad "train: rc $rc: $out"

# The adapter as adapter_model.bin: a torch.save zip (stored entries, a protocol-2 pickle of
# _rebuild_tensor_v2 calls over persistent storages), written without torch.
mkdir -p "$T/adapter_bin"
cp "$T/out/adapter_config.json" "$T/adapter_bin/"
python3 - "$T/out/adapter_model.safetensors" "$T/adapter_bin/adapter_model.bin" <<'PY'
import json, pickle, struct, sys, types, zipfile
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
torch = types.ModuleType("torch"); utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch; sys.modules["torch._utils"] = utils
class FloatStorage: pass
FloatStorage.__module__ = "torch"; torch.FloatStorage = FloatStorage
def _rebuild_tensor_v2(*a): pass
_rebuild_tensor_v2.__module__ = "torch._utils"; utils._rebuild_tensor_v2 = _rebuild_tensor_v2
class Storage:
    def __init__(self, key, numel): self.key, self.numel = key, numel
class Tensor:
    def __init__(self, storage, shape):
        self.storage, self.shape = storage, shape
    def __reduce__(self):
        stride = [1] * len(self.shape)
        for i in range(len(self.shape) - 2, -1, -1): stride[i] = stride[i + 1] * self.shape[i + 1]
        return (_rebuild_tensor_v2, (self.storage, 0, tuple(self.shape), tuple(stride), False, {}))
class P(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", FloatStorage, obj.key, "cpu", obj.numel) if isinstance(obj, Storage) else None
sd, blobs = {}, {}
for i, (name, t) in enumerate(sorted((k, v) for k, v in header.items() if k != "__metadata__")):
    assert t["dtype"] == "F32", t["dtype"]
    b, e = t["data_offsets"]
    blobs[str(i)] = data[b:e]
    sd[name] = Tensor(Storage(str(i), (e - b) // 4), t["shape"])
import io
buf = io.BytesIO(); P(buf, protocol=2).dump(sd)
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as z:
    z.writestr("adapter_model/data.pkl", buf.getvalue())
    z.writestr("adapter_model/byteorder", "little")
    for k, v in blobs.items(): z.writestr(f"adapter_model/data/{k}", v)
    z.writestr("adapter_model/version", "3\n")
PY
"$BIN" logits --model "$T/model" --adapter "$T/out" --ids 1,2,3 --device cpu --dtype float32 --out "$T/a_st.safetensors" >/dev/null 2>&1 &&
  "$BIN" logits --model "$T/model" --adapter "$T/adapter_bin" --ids 1,2,3 --device cpu --dtype float32 --out "$T/a_bin.safetensors" >/dev/null 2>&1 &&
  cmp -s "$T/a_st.safetensors" "$T/a_bin.safetensors" && ok "adapter_model.bin applies as its safetensors twin" || bad "adapter_model.bin"

# Hostile: a pickle calling something else is refused by name, before anything runs.
python3 - "$T/evil/pytorch_model.bin" "$FIX/llama_bin/config.json" <<'PY'
import io, os, pickle, shutil, sys, zipfile
os.makedirs(os.path.dirname(sys.argv[1]))
shutil.copy(sys.argv[2], os.path.dirname(sys.argv[1]))
class Evil:
    def __reduce__(self): return (os.system, ("echo pwned > /tmp/st_pwned",))
buf = io.BytesIO(); pickle.dump({"model.embed_tokens.weight": Evil()}, buf, protocol=2)
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("a/data.pkl", buf.getvalue())
PY
out=$("$BIN" logits --model "$T/evil" --ids 1 --out "$T/e.safetensors" 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "posix system" <<<"$out" && [[ ! -e /tmp/st_pwned ]]; then ok "a pickle that calls os.system: refused, naming it"
else bad "evil pickle: rc $rc: $out"; fi
exit $fail
