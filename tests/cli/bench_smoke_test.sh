#!/usr/bin/env bash
# Smoke test of `streamtune bench` on the CPU backend: a tiny preset, two timed steps, JSON out.
# Checks every reported field exists and the figures are sane (positive rates, finite loss,
# consistent FLOP arithmetic), and that a streamed run moves exactly the layer bytes it should.
set -euo pipefail
BIN=${1:?usage: bench_smoke_test.sh path/to/streamtune}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$BIN" bench --preset tiny-llama --seq 64 --steps 2 --warmup 1 --device cpu --json >"$TMP/off.json"
"$BIN" bench --preset tiny-llama --seq 64 --steps 2 --warmup 1 --device cpu --stream ram --stream-buffers 2 \
  --no-ceilings --json >"$TMP/ram.json"

python3 - "$TMP/off.json" "$TMP/ram.json" <<'PY'
import json, math, sys

off = json.loads(open(sys.argv[1]).read())
ram = json.loads(open(sys.argv[2]).read())
need = ["model", "device", "dtype", "stream", "seq", "batch", "tokens_per_step", "tok_s", "step_ms",
        "tflops", "tflops_with_attn", "flops_per_step", "attn_flops_per_step", "gemm_ceiling_tflops",
        "h2d_pinned_gbps", "bytes_streamed_per_step", "stream_gbps", "exposed_copy_ms", "compute_fraction",
        "vram_allocated_bytes", "vram_peak_used_bytes", "host_store_bytes", "loss_first", "loss_last",
        "resident_layers", "layers"]
for name, r in (("off", off), ("ram", ram)):
    missing = [k for k in need if k not in r]
    assert not missing, f"{name}: missing fields {missing}"
    assert r["tok_s"] > 0 and r["step_ms"] > 0, (name, r["tok_s"], r["step_ms"])
    assert r["tokens_per_step"] == 64 and r["seq"] == 64 and r["batch"] == 1
    assert abs(r["tok_s"] - 64 / (r["step_ms"] / 1e3)) <= 0.01 * r["tok_s"] + 0.2, (name, r["tok_s"], r["step_ms"])
    for k in ("loss_first", "loss_last"):
        # random weights: the loss is about ln(V) = ln(512) = 6.24
        assert math.isfinite(r[k]) and 4.0 < r[k] < 9.0, (name, k, r[k])
    assert r["tflops_with_attn"] >= r["tflops"] > 0
    assert r["vram_allocated_bytes"] > 0 and r["host_store_bytes"] > 0
    assert r["layers"] == 2
# tiny-llama: H 64, F 160, NH 4, KVH 2, D 16, V 512, L 2. Layer params = q,k,v,o + gate/up/down + 2 norms.
H, F, q, kv, V, L, T = 64, 160, 64, 32, 512, 2, 64
layer = H * q + 2 * H * kv + q * H + 3 * H * F + 2 * H
assert off["flops_per_step"] == 6 * L * layer * T + 4 * V * H * T, off["flops_per_step"]
assert off["attn_flops_per_step"] == 8 * T * T * 16 * 4 * L, off["attn_flops_per_step"]
assert off["gemm_ceiling_tflops"] > 0 and off["h2d_pinned_gbps"] > 0
assert off["stream"] == "off" and off["resident_layers"] == 2 and off["bytes_streamed_per_step"] == 0
assert off["exposed_copy_ms"] == 0 and off["compute_fraction"] == 1
# Streamed with 2 buffers over 2 layers: both layers stay in the pool across steps (reuse), so a
# steady-state step copies nothing; with the visit order 0,1,1,0 no load is ever needed again.
assert ram["stream"] == "ram" and ram["resident_layers"] == 0 and ram["stream_buffers"] == 2
assert ram["bytes_streamed_per_step"] == 0, ram["bytes_streamed_per_step"]
assert ram["gemm_ceiling_tflops"] is None
# Same seed, same weights, same kernels: streaming must not change the loss (design.md section 1).
assert ram["loss_first"] == off["loss_first"] and ram["loss_last"] == off["loss_last"], (ram, off)
print("bench smoke: ok", off["tok_s"], "tok/s")
PY

# A streamed run with fewer buffers than layers must copy: 1 buffer, 2 layers -> loads every visit
# except the forward->backward turn (0,1 | 1,0: layer 1 is a hit) and the backward->forward turn.
"$BIN" bench --preset tiny-llama --seq 32 --steps 2 --warmup 1 --device cpu --stream ram --stream-buffers 1 \
  --no-ceilings --json >"$TMP/one.json"
python3 - "$TMP/one.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["stream_buffers"] == 1 and r["loads_per_step"] == 2 and r["reuse_hits_per_step"] == 2, r
assert r["bytes_streamed_per_step"] > 0 and r["bytes_streamed_per_step"] % 2 == 0, r
assert r["exposed_copy_ms"] is not None and r["exposed_copy_ms"] >= 0
PY

# --grad-accum with layer-major order: 3 micro-batches a step, all held (no budget), tok/s over all.
"$BIN" bench --preset tiny-llama --seq 32 --steps 1 --warmup 1 --device cpu --stream ram --grad-accum 3 \
  --no-ceilings --json >"$TMP/ga.json"
python3 - "$TMP/ga.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["grad_accum"] == 3 and r["micro_batch_slots"] == 3 and r["tokens_per_step"] == 96, r
PY

# --devices N (data parallel, threads on the CPU): the same global window on 1 and 2 devices gives
# the same losses; --devices needs --model.
"$BIN" init-model --preset tiny-llama --out "$TMP/m" >/dev/null
for d in 1 2; do
  "$BIN" bench --model "$TMP/m" --devices $d --device cpu --seq 32 --batch 2 --grad-accum $((4 / d)) --steps 2 \
    --warmup 1 --json >"$TMP/dp$d.json"
done
python3 - "$TMP/dp1.json" "$TMP/dp2.json" <<'PY'
import json, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:])
assert a["world_size"] == 1 and b["world_size"] == 2 and a["tokens_per_step"] == b["tokens_per_step"] == 256, (a, b)
assert abs(a["loss_first"] - b["loss_first"]) < 1e-6 and abs(a["loss_last"] - b["loss_last"]) < 1e-6, (a, b)
assert b["tok_s"] > 0 and abs(b["tok_s_per_device"] * 2 - b["tok_s"]) < 1e-6 * b["tok_s"], b
PY
set +e
"$BIN" bench --preset tiny-llama --devices 2 --device cpu 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--devices needs --model" "$TMP/err" || { echo "--devices with a preset: rc=$rc"; cat "$TMP/err"; exit 1; }

# A masked prompt (model/head.h Note [trained rows]): the head runs on the trained positions only;
# the losses must match the head run on every position (STREAMTUNE_HEAD_ROWS=all), and the report
# says what was masked.
"$BIN" bench --preset tiny-llama --seq 256 --prompt-len 150 --steps 2 --warmup 1 --device cpu --no-ceilings \
  --json >"$TMP/prompt.json"
STREAMTUNE_HEAD_ROWS=all "$BIN" bench --preset tiny-llama --seq 256 --prompt-len 150 --steps 2 --warmup 1 \
  --device cpu --no-ceilings --json >"$TMP/prompt_all.json"
python3 - "$TMP/prompt.json" "$TMP/prompt_all.json" <<'PY'
import json, math, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:3])
assert a["prompt_len"] == 150 and a["tokens_per_step"] == 256, a
for k in ("loss_first", "loss_last"):
    assert math.isfinite(a[k]) and abs(a[k] - b[k]) <= 1e-5 * abs(b[k]), (k, a[k], b[k])
print("bench smoke: prompt-len ok", a["loss_first"], b["loss_first"])
PY
set +e
"$BIN" bench --preset tiny-llama --seq 64 --prompt-len 64 --device cpu 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--prompt-len" "$TMP/err" || { echo "--prompt-len >= --seq: rc=$rc"; cat "$TMP/err"; exit 1; }

# Usage errors exit 2 with a message naming the flag.
set +e
"$BIN" bench --preset tiny-llama --stream sideways --device cpu 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--stream" "$TMP/err" || { echo "bad --stream not refused: rc=$rc"; cat "$TMP/err"; exit 1; }
set +e
"$BIN" bench --preset no-such-model --device cpu 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "no-such-model" "$TMP/err" || { echo "unknown preset not refused: rc=$rc"; cat "$TMP/err"; exit 1; }
echo "bench smoke: all ok"
