# Sourced by the CLI tests that train a 6-layer tiny model several ways and compare the bits
# (stream_equivalence, qlora_train, layer_major). Not a test itself.

# write_token_data FILE SEED N: N rows {"input_ids": [...]} of 9..47 random ids below 512.
write_token_data() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, random, sys
r = random.Random(int(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[3])):
        f.write(json.dumps({"input_ids": [r.randrange(512) for _ in range(r.randrange(9, 48))]}) + "\n")
PY
}

# make_six_layer BIN PRESET OUT SEED: the preset with 6 decoder layers, random weights, in OUT.
make_six_layer() {
  local bin=$1 preset=$2 out=$3 seed=$4
  "$bin" init-model --preset "$preset" --out "$out.base" >/dev/null
  python3 - "$out.base/config.json" "$out.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 6
json.dump(c, open(sys.argv[2], "w"))
PY
  "$bin" init-model --config "$out.json" --out "$out" --seed "$seed" >/dev/null
}

# sig_of DIR: "<md5 of the logged losses>/<md5 of the adapter bytes>" of a finished run.
sig_of() {
  echo "$(grep -o '"loss":[^,]*' "$1/metrics.jsonl" | md5sum | cut -c1-16)/$(md5sum < "$1/adapter_model.safetensors" | cut -c1-16)"
}

# budget_for BIN YAML WANT [ARGS...]: the smallest vram_budget (in KiB, printed as "<n>KiB") at
# which `train YAML ARGS` plans at least WANT layers resident, found by bisection over one-step
# runs, so a test that wants "some layers resident, some streamed" does not hang on a number that
# moves whenever the activations' or the scratch's size does. Fails past 64 MiB.
budget_for() {
  local bin=$1 yaml=$2 want=$3
  shift 3
  local lo=1 hi=65536 mid k d
  d=$(mktemp -d)
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    k=$("$bin" train "$yaml" "$@" --max_steps=1 --vram_budget=${mid}KiB --output_dir="$d/o" 2>&1 |
        sed -nE 's/^plan: .* ([0-9]+) of [0-9]+ layers resident.*/\1/p' | head -1)
    if [ -n "$k" ] && [ "$k" -ge "$want" ]; then hi=$mid; else lo=$mid; fi
  done
  rm -rf "$d"
  [ "$hi" -lt 65536 ] || { echo "budget_for: no budget up to 64 MiB plans $want layers resident" >&2; return 1; }
  echo "${hi}KiB"
}

# six_layer_setup BIN PRESET [DATA_SEED ROWS MODEL_SEED]: a temp dir in $w (removed on exit)
# holding data.jsonl (ROWS token rows, default 24, seed DATA_SEED, default 3), the 6-layer PRESET
# model in $w/m (seed MODEL_SEED, default 7), and $w/c.yaml training it on the CPU (base_model,
# datasets, device, cache_dir); the caller appends its own keys to $w/c.yaml.
six_layer_setup() {
  w=$(mktemp -d)
  trap 'rm -rf "$w"' EXIT
  write_token_data "$w/data.jsonl" "${3:-3}" "${4:-24}"
  make_six_layer "$1" "$2" "$w/m" "${5:-7}"
  printf 'base_model: %s\ndatasets:\n  - path: %s\n    type: tokenized\ndevice: cpu\ncache_dir: %s\n' \
    "$w/m" "$w/data.jsonl" "$w/cache" >"$w/c.yaml"
}
