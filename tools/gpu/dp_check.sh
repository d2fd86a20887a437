#!/usr/bin/env bash
# Data parallel on 2 GPUs through NCCL (one device call on nvidia-h200-x2; binaries from .devbin):
# the same tiny run with devices: 1 and devices: 2 (gradient_accumulation_steps per device halved,
# so both see the same 4-micro-batch window); losses side by side. Then devices: 2 with layers
# streamed from RAM (300 MiB a GPU) on the dense and on the code12 base (stream_compress false /
# true), and on the dense base with ram_budget 90MiB (the shared arena keeps a few layers, each
# replica reads the rest from disk: store/host_memory.h Note [partial RAM store]): the same losses
# and adapter bytes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune W=/tmp/dpc; rm -rf $W; mkdir -p $W
nvidia-smi -L
$B init-model --preset smollm2-135m --out $W/m --dtype bfloat16 >/dev/null
python3 - $W/d.jsonl <<'PY'
import json, random, sys
r = random.Random(5)
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        f.write(json.dumps({"input_ids": [r.randrange(49152) for _ in range(r.randrange(60, 257))]}) + "\n")
PY
cat > $W/c.yaml <<Y
base_model: $W/m
datasets:
  - path: $W/d.jsonl
    type: tokenized
dtype: bfloat16
device: cuda
lora_r: 16
lora_target_modules: [q_proj, v_proj]
micro_batch_size: 2
max_steps: 8
sequence_len: 256
shuffle: false
cache_dir: $W/cache
Y
for n in 1 2; do
  acc=$((4 / n))
  timeout 120 $B train $W/c.yaml --devices=$n --gradient_accumulation_steps=$acc --output_dir=$W/o$n >$W/o$n.log 2>&1
  echo "devices=$n accumulation=$acc rc=$? $(grep -m1 -iE 'replica|devices|nccl' $W/o$n.log)"
  python3 -c "import json; print(' '.join('%.6f' % json.loads(l)['loss'] for l in open('$W/o$n/metrics.jsonl') if '\"loss\"' in l))"
  tail -2 $W/o$n.log
done
for v in "false -" "true -" "false 90MiB"; do
  set -- $v
  sc=$1 rb=(); [ "$2" != "-" ] && rb=(--ram_budget=$2)
  d=$W/s_$sc$2
  timeout 120 $B train $W/c.yaml --devices=2 --gradient_accumulation_steps=2 --vram_budget=300MiB --stream_compress=$sc \
    "${rb[@]}" --output_dir=$d >$d.log 2>&1
  echo "devices=2 streamed stream_compress=$sc ram_budget=$2 rc=$? $(grep -m1 '^plan:' $d.log | cut -c1-120)"
  grep -m1 '^host RAM' $d.log
  echo "  losses $(python3 -c "import json; print(' '.join(repr(json.loads(l)['loss']) for l in open('$d/metrics.jsonl') if '\"loss\"' in l))") adapter $(md5sum < $d/adapter_model.safetensors | cut -c1-16)"
  tail -1 $d.log
done
