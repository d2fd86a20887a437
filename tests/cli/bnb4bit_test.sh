#!/usr/bin/env bash
# Reading bitsandbytes 4-bit checkpoints (io/bnb4bit.h; formats.md §5.3-5.4). A Python writer here,
# independent of the C++ reader and following formats.md only, quantizes a tiny Llama's seven
# linears per layer to NF4 in the bnb layout (packed U8 codes [n/2, 1], .absmax, .quant_map,
# .quant_state.bitsandbytes__nf4 JSON; layers 1 and 3 with nested (double-quantized) scales) and
# writes, beside it, a plain f32 checkpoint of the values those files decode to (numpy f32 math).
# Then: `logits` of the two checkpoints are equal bit for bit, QLoRA and LoRA training runs on the
# two are identical, and an FP4 file, a quant_state whose shape disagrees with its data, and a
# truncated scale tensor each fail naming the tensor.
set -euo pipefail
bin=$(realpath "$1")
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
"$bin" init-model --preset tiny-llama --out "$w/base" --seed 3 --dtype bfloat16 >/dev/null
python3 - "$w" <<'PY'
import json, os, struct, sys
import numpy as np

w = sys.argv[1]
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
MID = ((NF4[:-1].astype(np.float64) + NF4[1:].astype(np.float64)) / 2).astype(np.float32)

def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        b = data[v["data_offsets"][0]:v["data_offsets"][1]]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(b, {"F32": np.float32, "U8": np.uint8}[v["dtype"]])
        out[k] = (a.reshape(v["shape"]), v["dtype"])
    return out

def write_st(path, tensors):  # name -> (np array, dtype string)
    header, blobs, off = {}, [], 0
    for k, (a, dt) in tensors.items():
        b = ((a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes() if dt == "BF16"
             else np.ascontiguousarray(a).tobytes())
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj))); f.write(hj)
        for b in blobs: f.write(b)

def quantize(x, nested):
    flat = x.astype(np.float32).reshape(-1)
    n = flat.size; nb = (n + 63) // 64
    pad = np.zeros(nb * 64, np.float32); pad[:n] = flat
    blocks = pad.reshape(nb, 64)
    absmax = np.abs(blocks).max(axis=1).astype(np.float32)
    scaled = blocks * (np.float32(1) / absmax)[:, None]
    idx = (scaled[..., None] > MID).sum(axis=-1).astype(np.uint8).reshape(-1)[:n]
    if n % 2: idx = np.append(idx, 0)
    codes = ((idx[0::2] << 4) | idx[1::2]).astype(np.uint8)
    st = {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": list(x.shape)}
    aux = {".quant_map": (NF4, "F32")}
    if not nested:
        aux[".absmax"] = (absmax, "F32")
        restored = absmax
    else:
        offset = np.float32(absmax.mean())
        qmap = np.linspace(-1, 1, 256, dtype=np.float32)
        d = (absmax - offset).astype(np.float32)
        nb2 = (nb + 255) // 256
        a2 = np.array([np.abs(d[i * 256:(i + 1) * 256]).max() for i in range(nb2)], np.float32)
        q = np.abs(d[:, None] / np.repeat(a2, 256)[:nb, None] - qmap[None, :]).argmin(axis=1).astype(np.uint8)
        aux[".absmax"] = (q, "U8")
        aux[".nested_absmax"] = (a2, "F32")
        aux[".nested_quant_map"] = (qmap, "F32")
        st.update({"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": float(offset)})
        restored = (qmap[q] * np.repeat(a2, 256)[:nb]).astype(np.float32) + offset  # two f32 roundings
    deq = (NF4[idx[:n]] * np.repeat(restored, 64)[:n]).astype(np.float32).reshape(x.shape)
    js = np.frombuffer(json.dumps(st).encode(), np.uint8)
    return codes.reshape(-1, 1), aux, js, deq

src = read_st(os.path.join(w, "base", "model.safetensors"))
cfg = json.load(open(os.path.join(w, "base", "config.json")))
bnb, dense, fp4, bad_shape, bad_absmax, huge = {}, {}, {}, {}, {}, {}
linears = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
for k, (a, dt) in src.items():
    if not any(l + ".weight" in k for l in linears):
        for d in (bnb, dense, fp4, bad_shape, bad_absmax, huge): d[k] = (a, dt)
        continue
    layer = int(k.split(".")[2])
    codes, aux, js, deq = quantize(a, nested=layer in (1, 3))
    dense[k] = (deq, "F32")
    for d in (bnb, fp4, bad_shape, bad_absmax, huge):
        d[k] = (codes, "U8")
        for s, t in aux.items(): d[k + s] = t
        d[k + ".quant_state.bitsandbytes__nf4"] = (js, "U8")
    if k.endswith("layers.0.self_attn.v_proj.weight"):
        j = json.loads(bytes(js)); j["quant_type"] = "fp4"
        del fp4[k + ".quant_state.bitsandbytes__nf4"]
        fp4[k + ".quant_state.bitsandbytes__fp4"] = (np.frombuffer(json.dumps(j).encode(), np.uint8), "U8")
        j = json.loads(bytes(js)); j["shape"] = [j["shape"][0], j["shape"][1] * 2]
        bad_shape[k + ".quant_state.bitsandbytes__nf4"] = (np.frombuffer(json.dumps(j).encode(), np.uint8), "U8")
    if k.endswith("layers.1.mlp.up_proj.weight"):
        bad_absmax[k + ".absmax"] = (aux[".absmax"][0][:-1], "U8")
    if k.endswith("layers.0.mlp.down_proj.weight"):  # a product of dims past int64
        j = json.loads(bytes(js)); j["shape"] = [2**40, 2**40, 2**40]
        huge[k + ".quant_state.bitsandbytes__nf4"] = (np.frombuffer(json.dumps(j).encode(), np.uint8), "U8")
qcfg = dict(cfg, quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True,
                                     "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True})
for name, tensors, c in (("bnb", bnb, qcfg), ("dense", dense, cfg), ("fp4", fp4, qcfg), ("bad_shape", bad_shape, qcfg),
                         ("bad_absmax", bad_absmax, qcfg), ("huge", huge, qcfg)):
    os.makedirs(os.path.join(w, name))
    json.dump(c, open(os.path.join(w, name, "config.json"), "w"))
    write_st(os.path.join(w, name, "model.safetensors"), tensors)
PY

# 1. The decoded weights: logits (f32, CPU) of the bnb checkpoint equal those of its f32 decode.
"$bin" logits --model "$w/bnb" --ids 1,5,9,200,7,3,44 --out "$w/l_bnb.st" --device cpu >/dev/null
"$bin" logits --model "$w/dense" --ids 1,5,9,200,7,3,44 --out "$w/l_dense.st" --device cpu >/dev/null
python3 - "$w" <<'PY'
import json, struct, sys
import numpy as np
def logits(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    v = h["logits_0"]; return np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
a, b = logits(sys.argv[1] + "/l_bnb.st"), logits(sys.argv[1] + "/l_dense.st")
assert a.size > 0 and np.array_equal(a, b), "bnb logits differ from the f32 decode's: max %g" % np.abs(a - b).max()
PY

# 2. Training: QLoRA and LoRA on the bnb checkpoint are the runs on its decode.
printf '{"input_ids": [%s]}\n' 3,8,1,9,200,31,7,7,12,99,4 5,6,7,8,9,10,11,12,13 > "$w/data.jsonl"
sig() { echo "$(grep -o '"loss":[^,]*' "$1/metrics.jsonl" | md5sum | cut -c1-16)/$(md5sum < "$1/adapter_model.safetensors" | cut -c1-16)"; }
for adapter in qlora lora; do
  for m in bnb dense; do
    cat > "$w/$adapter-$m.yaml" <<Y
base_model: $w/$m
datasets:
  - path: $w/data.jsonl
    type: tokenized
device: cpu
adapter: $adapter
lora_r: 4
lora_target_modules: [q_proj, v_proj, down_proj]
micro_batch_size: 2
max_steps: 4
sequence_len: 16
cache_dir: $w/cache
output_dir: $w/out-$adapter-$m
Y
    "$bin" train "$w/$adapter-$m.yaml" >"$w/$adapter-$m.log" 2>&1 || { cat "$w/$adapter-$m.log"; exit 1; }
  done
  [ "$(sig "$w/out-$adapter-bnb")" = "$(sig "$w/out-$adapter-dense")" ] ||
    { echo "$adapter: the bnb checkpoint trains differently from its decode"; exit 1; }
done

# 3. QLoRA re-quantizes the decoded values to exactly the file's codes and (restored) block scales:
#    every bnb block holds a +-1 code, so its maximum decodes to +-absmax and maps back to it.
"$bin" shard "$w/bnb" --dtype float32 --quant nf4 --out "$w/store" >/dev/null 2>&1
python3 - "$w" <<'PY'
import json, struct, sys
import numpy as np
w = sys.argv[1]
def tensors(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); d = raw[8 + n:]
    return {k: (d[v["data_offsets"][0]:v["data_offsets"][1]], v["dtype"]) for k, v in h.items() if k != "__metadata__"}
src = tensors(w + "/bnb/model.safetensors")
checked = 0
for layer in (0, 1):
    st = tensors(w + "/store/layer_%03d.safetensors" % layer)
    for k, (b, dt) in st.items():
        if dt != "U8" or k not in src: continue
        assert b == src[k][0], "%s: codes differ from the bnb file's" % k
        ours = np.frombuffer(st[k + ".absmax"][0], np.float32)
        if src[k + ".absmax"][1] == "F32":
            assert np.array_equal(ours, np.frombuffer(src[k + ".absmax"][0], np.float32)), k + ".absmax differs"
        checked += 1
assert checked == 14, checked
PY

# 4. Damaged or unsupported files fail naming the tensor.
expect() {  # dir, message
  if "$bin" logits --model "$w/$1" --ids 1,2 --out "$w/x.st" --device cpu >"$w/$1.log" 2>&1; then echo "$1 accepted"; exit 1; fi
  grep -q -- "$2" "$w/$1.log" || { echo "$1: message lacks '$2':"; cat "$w/$1.log"; exit 1; }
}
expect fp4 "quant_type 'fp4' is not supported"
expect bad_shape "model.layers.0.self_attn.v_proj.weight"
expect bad_absmax "model.layers.1.mlp.up_proj.weight.absmax"
expect huge "'shape' is too large"
echo "bnb 4-bit: logits and training match the f32 decode; damaged files refused"
