#!/usr/bin/env bash
# Streaming is bit-identical to resident through the whole CLI: for two 6-layer models (Llama with
# GQA and untied head; Qwen2 with q/k/v biases and tied embeddings), 20 optimizer steps with LoRA
# dropout, the 20 losses (all 9 digits) and the adapter bytes are identical for stream off, ram
# with 2, 3 and 4 buffers (L buffers: tests/stream, where the planner is bypassed), disk with 2 and 3,
# budgets that leave k of L layers resident, and the embedding + lm_head kept in host memory with the
# lm_head streamed in vocabulary chunks (offload_embeddings; vocab_chunk 200 of 512 = 3 chunks),
# and every recompute mode (full: per-layer checkpointing; attention; none: nothing recomputed),
# chosen by the planner or forced, resident and with layers streamed; and a RAM budget too small
# for the store (store/host_memory.h Note [partial RAM store]: the layers that do not fit are read
# from the store files at each use), streamed and all resident.
set -euo pipefail
bin=$(realpath "$1")
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
. "$(dirname "$0")/six_layer_fixture.sh"
write_token_data "$w/data.jsonl" 11 24
for preset in tiny-llama tiny-qwen2; do
  make_six_layer "$bin" $preset "$w/m_$preset" 5
  cat > "$w/c_$preset.yaml" <<Y
base_model: $w/m_$preset
datasets:
  - path: $w/data.jsonl
    type: tokenized
device: cpu
lora_r: 4
lora_alpha: 8
lora_dropout: 0.1
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 20
sequence_len: 48
learning_rate: 0.003
vocab_chunk: 200
cache_dir: $w/cache
Y
  ref=""
  partial=0
  offloaded=0
  kept_none=0
  kept_att=0
  kept_input=0
  partial_ram=0
  # On the CPU nothing limits device memory, so a budget is what makes layers stream. Field 4:
  # offload_embeddings (default auto: the planner picks the placement that streams fewer bytes);
  # field 5: recompute (default auto: with no budget every activation is kept); field 6: ram_budget.
  for v in "off 2 - auto full" "off 2 -" "off 2 - auto attention" "ram 2 -" "disk 2 -" "ram 2 2400KiB" \
           "ram 3 2400KiB" "ram 4 2500KiB false" "disk 2 2200KiB" "disk 3 2400KiB false" "ram 2 2500KiB false" \
           "ram 2 - true" "disk 3 - true" "ram 2 2000KiB true" "disk 2 2200KiB true" "ram 2 4300KiB auto none" \
           "ram 2 2400KiB auto auto 600KiB" "ram 2 2000KiB true auto 700KiB" "off 2 - auto auto 1KiB"; do
    set -- $v
    extra=(--offload_embeddings="${4:-auto}" --recompute="${5:-auto}")
    [ "$3" != "-" ] && extra+=(--vram_budget="$3")
    [ -n "${6:-}" ] && extra+=(--ram_budget="$6")
    out="$w/o_${preset}_$1_$2_$3_${4:-auto}_${5:-auto}_${6:-}"
    if ! "$bin" train "$w/c_$preset.yaml" --stream=$1 --stream_buffers=$2 "${extra[@]}" --output_dir="$out" >"$out.log" 2>&1; then
      cat "$out.log"; exit 1
    fi
    plan=$(grep -m1 '^plan:' "$out.log")
    k=$(echo "$plan" | sed -E 's/.* ([0-9]+) of 6 layers resident.*/\1/')
    [ "$k" -gt 0 ] && [ "$k" -lt 6 ] && partial=$((partial + 1))
    case "$plan" in *"lm_head streamed"*) offloaded=$((offloaded + 1));; esac
    case "$plan" in
      *"no recompute"*) kept_none=$((kept_none + 1)); [ "$k" -lt 6 ] && kept_none=$((kept_none + 10));;
      *"attention outputs kept"*) kept_att=$((kept_att + 1));;
      *) kept_input=$((kept_input + 1));;
    esac
    if [ "$3" != "-" ] && [ "$k" -ge 6 ]; then echo "$preset $v: nothing streamed ($plan)"; exit 1; fi
    if [ -n "${6:-}" ]; then
      grep -q "read from the store files" "$out.log" || { echo "$preset $v: the RAM budget kept every layer"; cat "$out.log"; exit 1; }
      partial_ram=$((partial_ram + 1))
      grep -q "stream at the disk's speed" "$out.log" && partial_ram=$((partial_ram + 10))
    fi
    sig=$(sig_of "$out")
    [ "$(grep -c '"loss"' "$out/metrics.jsonl")" -eq 20 ] || { echo "$preset $v: not 20 steps"; exit 1; }
    echo "$preset $v: $sig | $plan"
    if [ -z "$ref" ]; then ref=$sig; elif [ "$sig" != "$ref" ]; then echo "MISMATCH vs stream off"; exit 1; fi
  done
  [ "$partial" -ge 1 ] || { echo "$preset: no variant left k of L layers resident (0 < k < 6)"; exit 1; }
  # Three ran, and at least one streamed layers from disk (counted x10).
  [ "$partial_ram" -ge 13 ] && [ $((partial_ram % 10)) -eq 3 ] ||
    { echo "$preset: the partial RAM store variants did not all run, or none streamed from disk ($partial_ram)"; exit 1; }
  [ "$offloaded" -ge 3 ] || { echo "$preset: fewer than 3 variants kept the embedding + lm_head on the host"; exit 1; }
  # Every recompute mode ran, and "none" ran once with layers streamed (counted x10).
  [ "$kept_none" -ge 12 ] && [ "$kept_att" -ge 1 ] && [ "$kept_input" -ge 1 ] ||
    { echo "$preset: recompute modes not all covered (none $kept_none, attention $kept_att, full $kept_input)"; exit 1; }
done
echo "all identical"
