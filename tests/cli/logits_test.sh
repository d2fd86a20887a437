#!/usr/bin/env bash
# `streamtune logits` against the HF goldens (tests/fixtures/README.md): for each fixture model,
# row 0 of data.jsonl with the fixture's PEFT adapter must give expected.safetensors "logits", and
# without the adapter "base_logits" (transformers + PEFT, f32, eager). Both the max abs error
# (relative to max |ref|) and the Frobenius-norm error (relative to ||ref||) must be < 1e-4.
# Also: --ids and --ids-file agree bit for bit, every row of the file is written, usage errors
# exit 2, and weights for more layers than the config names are reported.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_logits_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0

for fx in llama_gqa qwen2_tied qwen3_qknorm mistral_swa qwen2_swa qwen2_dora llama_layers; do
  D="tests/fixtures/$fx"
  ids=$(python3 -c "import json,sys; print(','.join(map(str, json.loads(open(sys.argv[1]).readline())['input_ids'])))" "$D/data.jsonl")
  out=$("$BIN" logits --model "$D/model" --adapter "$D/adapter" --ids "$ids" --out "$T/$fx.st" --device cpu 2>&1) ||
    { echo "FAIL $fx logits (adapter): $out"; fail=1; continue; }
  out=$("$BIN" logits --model "$D/model" --ids "$ids" --out "$T/$fx.base.st" --device cpu 2>&1) ||
    { echo "FAIL $fx logits (base): $out"; fail=1; continue; }
  out=$("$BIN" logits --model "$D/model" --adapter "$D/adapter" --ids-file "$D/data.jsonl" --out "$T/$fx.all.st" \
        --device cpu --dtype float32 2>&1) ||
    { echo "FAIL $fx logits (ids-file): $out"; fail=1; continue; }
  python3 - "$fx" "$D" "$T" <<'PY' || fail=1
import json, struct, sys
import numpy as np

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (path, k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"])
    return out

fx, d, t = sys.argv[1:4]
exp = load(f"{d}/expected.safetensors")
rows = [json.loads(l)["input_ids"] for l in open(f"{d}/data.jsonl") if l.strip()]
ok = True

def cmp(name, got, ref):
    global ok
    if got.shape != ref.shape:
        print(f"FAIL {fx} {name}: shape {got.shape} vs {ref.shape}")
        ok = False
        return
    g, r = got.astype(np.float64), ref.astype(np.float64)
    mx = np.abs(g - r).max() / np.abs(r).max()
    fro = np.linalg.norm(g - r) / np.linalg.norm(r)
    good = mx < 1e-4 and fro < 1e-4
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} {fx} {name}: max|d|/max|ref| {mx:.2e}, ||d||/||ref|| {fro:.2e}")

one, base, allr = load(f"{t}/{fx}.st"), load(f"{t}/{fx}.base.st"), load(f"{t}/{fx}.all.st")
cmp("logits (adapter)", one["logits_0"], exp["logits"])
cmp("base_logits", base["logits_0"], exp["base_logits"])
# The adapter must matter at all, or the first check proves nothing about LoRA.
eff = np.abs(exp["logits"] - exp["base_logits"]).max()
if eff < 1e-3:
    print(f"FAIL {fx}: the fixture adapter changes logits by only {eff:.2e}")
    ok = False
if set(allr) != {f"logits_{i}" for i in range(len(rows))}:
    print(f"FAIL {fx} ids-file: tensors {sorted(allr)} for {len(rows)} rows")
    ok = False
for i, r in enumerate(rows):
    if allr[f"logits_{i}"].shape[0] != len(r):
        print(f"FAIL {fx} ids-file row {i}: {allr[f'logits_{i}'].shape[0]} positions, want {len(r)}")
        ok = False
if not np.array_equal(allr["logits_0"], one["logits_0"]):
    print(f"FAIL {fx}: --ids-file row 0 differs from --ids")
    ok = False
sys.exit(0 if ok else 1)
PY
done

check() {  # check NAME EXPECTED_RC PATTERN -- ARGS...
  local name="$1" want_rc="$2" pattern="$3"; shift 4
  local out rc
  out=$("$BIN" "$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc ]]; then echo "FAIL $name: rc $rc, want $want_rc: $out"; fail=1; return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL $name: output lacks /$pattern/: $out"; fail=1; return; fi
  echo "ok   $name"
}
M=tests/fixtures/llama_gqa/model
check no-ids 2 'exactly one of --ids' -- logits --model "$M" --out "$T/x.st"
check bad-id 2 "--ids: 'x' is not a token id" -- logits --model "$M" --ids 1,x --out "$T/x.st"
check id-range 1 'outside the vocabulary' -- logits --model "$M" --ids 1,9999 --out "$T/x.st" --device cpu
check bad-adapter 1 'adapter_config.json' -- logits --model "$M" --adapter /nonexistent --ids 1 --out "$T/x.st"
# --out on or inside an input is refused before anything is written (it overwrote the weights).
cp -r tests/fixtures/llama_gqa "$T/gqa"
sum_before=$(cat "$T"/gqa/model/* "$T"/gqa/adapter/* | md5sum)
check out-is-model 2 'lies inside --model' -- logits --model "$T/gqa/model" --ids 1 --out "$T/gqa/model/model.safetensors"
check out-in-adapter 2 'lies inside --adapter' -- logits --model "$T/gqa/model" --adapter "$T/gqa/adapter" --ids 1 --out "$T/gqa/adapter/x.st"
check out-is-ids 2 'lies inside --ids-file' -- logits --model "$T/gqa/model" --ids-file "$T/gqa/data.jsonl" --out "$T/gqa/data.jsonl"
[[ "$(cat "$T"/gqa/model/* "$T"/gqa/adapter/* | md5sum)" == "$sum_before" ]] || { echo "FAIL inputs changed"; fail=1; }
# A config cut to fewer layers than the weights hold runs (as transformers does) but says so.
mkdir -p "$T/cut" && cp "$M"/* "$T/cut/"
sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$T/cut/config.json"
check fewer-layers 0 'num_hidden_layers 1: layer 1 is not used' -- logits --model "$T/cut" --ids 1,2 --out "$T/x.st" --device cpu
exit $fail
