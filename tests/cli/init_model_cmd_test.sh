#!/usr/bin/env bash
# init-model on the tiny presets, read back with an independent safetensors parser (python3
# stdlib): header layout, names, dtypes, norms == 1, weights ~ N(0, 0.02); same seed = same bytes.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_init_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
for preset in tiny-llama tiny-qwen2 tiny-qwen3; do
  if ! "$BIN" init-model --preset "$preset" --out "$T/$preset" --seed 11 >"$T/log" 2>&1; then
    echo "FAIL $preset: init-model failed: $(cat "$T/log")"; fail=1; continue
  fi
  grep -q "^wrote $T/$preset: .* params" "$T/log" || { echo "FAIL $preset: summary line: $(cat "$T/log")"; fail=1; }
  python3 - "$T/$preset" "$preset" <<'PY' || fail=1
import json, math, struct, sys
d, preset = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{d}/config.json"))
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
assert n % 8 == 0, "header not padded to 8"
hdr = json.loads(raw[8:8 + n])
assert hdr.pop("__metadata__") == {"format": "pt"}
data = raw[8 + n:]
ends = sorted((v["data_offsets"][0], v["data_offsets"][1]) for v in hdr.values())
pos = 0
for b, e in ends:
    assert b == pos, "gap or overlap"
    pos = e
assert pos == len(data), "trailing bytes"
H, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
D = cfg.get("head_dim") or H // cfg["num_attention_heads"]
assert hdr["model.embed_tokens.weight"]["shape"] == [V, H]
assert hdr["model.layers.1.self_attn.q_proj.weight"]["shape"] == [cfg["num_attention_heads"] * D, H]
assert hdr["model.layers.1.self_attn.k_proj.weight"]["shape"] == [cfg["num_key_value_heads"] * D, H]
assert ("lm_head.weight" in hdr) == (not cfg["tie_word_embeddings"])
assert ("model.layers.0.self_attn.q_proj.bias" in hdr) == (preset == "tiny-qwen2")
assert ("model.layers.0.self_attn.q_norm.weight" in hdr) == (preset == "tiny-qwen3")
def vals(name):
    v = hdr[name]; assert v["dtype"] == "BF16"
    b, e = v["data_offsets"]
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack(f"<{(e-b)//2}H", data[b:e])]
for name in hdr:
    if name.endswith("norm.weight"):
        assert set(vals(name)) == {1.0}, name
w = vals("model.embed_tokens.weight")
mean = sum(w) / len(w); sd = math.sqrt(sum((x - mean) ** 2 for x in w) / len(w))
assert abs(mean) < 1e-3 and abs(sd - 0.02) < 1e-3, (mean, sd)
print(f"ok   {preset}: {len(hdr)} tensors, embed mean {mean:.5f} sd {sd:.5f}")
PY
done
# Same seed -> identical bytes (with another thread count); other seed -> different bytes.
"$BIN" init-model --preset tiny-llama --out "$T/again" --seed 11 --threads 1 >/dev/null || fail=1
"$BIN" init-model --preset tiny-llama --out "$T/other" --seed 12 >/dev/null || fail=1
cmp -s "$T/tiny-llama/model.safetensors" "$T/again/model.safetensors" || { echo "FAIL same seed differs"; fail=1; }
cmp -s "$T/tiny-llama/model.safetensors" "$T/other/model.safetensors" && { echo "FAIL seeds 11 and 12 gave the same bytes"; fail=1; }
# From a config.json instead of a preset: same bytes as the preset it came from.
"$BIN" init-model --config "$T/tiny-llama/config.json" --out "$T/fromcfg" --seed 11 >/dev/null || fail=1
cmp -s "$T/tiny-llama/model.safetensors" "$T/fromcfg/model.safetensors" || { echo "FAIL --config differs from --preset"; fail=1; }
# Refuses to overwrite, then --force with small shards writes an index.
out=$("$BIN" init-model --preset tiny-llama --out "$T/again" 2>&1); rc=$?
[[ $rc -eq 2 && "$out" == *"already holds a checkpoint"* ]] || { echo "FAIL overwrite refusal: rc $rc: $out"; fail=1; }
"$BIN" init-model --preset tiny-llama --out "$T/again" --force --max-shard-size 50KB >/dev/null || fail=1
[[ -f "$T/again/model.safetensors.index.json" && ! -f "$T/again/model.safetensors" ]] || { echo "FAIL sharded output"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok   determinism, --config, --force, sharding"
# A layer store where a model is expected is named as one, with the model it came from.
"$BIN" shard "$T/tiny-llama" --out "$T/store" >/dev/null 2>&1 || fail=1
for cmd in "generate --model $T/store --prompt hi" "merge --model $T/store --adapter $T/none --out $T/merged"; do
  out=$("$BIN" $cmd 2>&1); rc=$?
  [[ $rc -ne 0 && "$out" == *"is a streamtune layer store"* && "$out" == *"$T/tiny-llama"* ]] ||
    { echo "FAIL $cmd on a layer store: rc $rc: $out"; fail=1; }
done
[[ $fail -eq 0 ]] && echo "ok   a layer store given as the model is refused by name"
exit $fail
