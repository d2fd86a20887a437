#!/usr/bin/env bash
# `streamtune train` on bad configs: exit 2 with the file, line and key named; --dry-run shows
# the resolved config (paths relative to the YAML file, overrides applied).
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_cfg_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
expect() {  # expect NAME RC PATTERN YAML_TEXT [ARGS...]
  local name="$1" want_rc="$2" pattern="$3" text="$4"; shift 4
  printf '%s' "$text" >"$T/$name.yaml"
  local out rc
  out=$("$BIN" train "$T/$name.yaml" "$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc ]]; then echo "FAIL $name: rc $rc, want $want_rc: $out"; fail=1; return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL $name: output lacks /$pattern/: $out"; fail=1; return; fi
  echo "ok   $name"
}
GOOD=$'base_model: model\noutput_dir: runs/a\ndatasets:\n  - path: data/train.jsonl\n    type: tokenized\n'
expect unknown-key 2 "^streamtune: error: .*unknown-key.yaml:3:1: unknown key 'lerning_rate' \(did you mean 'learning_rate'\?\)" \
  $'base_model: m\ndatasets: [d.jsonl]\nlerning_rate: 0.001\n'
expect malformed 2 "malformed.yaml:4:[0-9]+: malformed YAML" \
  $'base_model: m\ndatasets:\n  - path: a\n   type: text\n'
expect bad-dtype 2 "bad-dtype.yaml:2:1: key 'dtype': 'float8' is not one of: bfloat16, float32" \
  $'base_model: m\ndtype: float8\n'
expect bad-sched 2 "key 'lr_scheduler': 'foo' is not one of" $'lr_scheduler: foo\n'
expect bad-r 2 "key 'lora_r': must be in \[1, 65536\], got -8" $'lora_r: -8\n'
expect huge-r 2 "key 'lora_r': must be in \[1, 65536\], got 100000" $'lora_r: 100000\n'
expect huge-seq 2 "key 'sequence_len': must be in \[1, 16777216\], got 4611686018427387904" \
  $'sequence_len: 4611686018427387904\n'
expect bad-stream 2 "key 'stream': 'xyz' is not one of: off, ram, disk" $'stream: xyz\n'
expect bad-recompute 2 "key 'recompute': 'sometimes' is not one of: auto, full, attention, none" $'recompute: sometimes\n'
expect bad-attention 2 "key 'attention': 'flash' is not one of: auto, own" $'attention: flash\n'
expect dora-adapter 2 "DoRA is 'adapter: lora' \(or qlora\) with 'use_dora: true'" $'adapter: dora\n'
expect pissa 2 "key 'lora_init': LoRA initialisation 'pissa' is not supported" $'lora_init: pissa\n'
expect vera 2 "adapter type 'vera' is not supported" $'peft_type: vera\n'
expect missing-base 2 "missing required key 'base_model'" $'datasets: [d.jsonl]\n'
expect bad-override 2 "--lora_r=zero: key 'lora_r': expected an integer" "$GOOD" --lora_r=zero
expect override-unknown 2 "unknown key 'lora_rr' \(did you mean 'lora_r'\?\)" "$GOOD" --lora-rr=4
out=$("$BIN" train "$T/nope.yaml" 2>&1); rc=$?
[[ $rc -eq 2 && "$out" == *"nope.yaml"* ]] && echo "ok   missing-file" || { echo "FAIL missing-file: rc $rc: $out"; fail=1; }

# --dry-run: resolved paths and overrides.
mkdir -p "$T/sub"
printf '%s' "$GOOD" >"$T/sub/good.yaml"
out=$(cd / && "$BIN" train "$T/sub/good.yaml" --lora-r=32 --lora_target_modules=q_proj,k_proj --dry-run 2>&1); rc=$?
if [[ $rc -eq 0 && "$out" == *"base_model: \"$T/sub/model\""* && "$out" == *"path: $T/sub/data/train.jsonl"* &&
      "$out" == *"lora_r: 32"* && "$out" == *"output_dir: \"$T/sub/runs/a\""* && "$out" == *"lora_target_modules: [q_proj, k_proj]"* ]]; then
  echo "ok   dry-run"
else
  echo "FAIL dry-run: rc $rc: $out"; fail=1
fi
# The printed config is itself a valid config that prints the same.
printf '%s\n' "$out" >"$T/sub/printed.yaml"
out2=$("$BIN" train "$T/sub/printed.yaml" --dry-run 2>&1)
[[ "$out2" == "$out" ]] && echo "ok   dry-run round trip" || { echo "FAIL dry-run round trip: $out2"; fail=1; }
# A valid config whose base model does not exist: a runtime error (exit 1), not a usage error.
out=$("$BIN" train "$T/sub/good.yaml" --stream=off --device=cpu 2>&1); rc=$?
[[ $rc -eq 1 && "$out" == "streamtune: error: "* ]] && echo "ok   runtime-error" || { echo "FAIL runtime-error: rc $rc: $out"; fail=1; }
exit $fail
