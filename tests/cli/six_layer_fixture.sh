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
