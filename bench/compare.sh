#!/usr/bin/env bash
# Side-by-side benchmark: `streamtune bench` against the PyTorch peers, in ONE device call.
#
#   bench/compare.sh                 run everything (on the GPU machine, from the repo root)
#   bench/compare.sh --table DIR     only print the table from the JSON files already in DIR
#
# The peers (peft_bench.py: HF transformers + PEFT, resident, gradient checkpointing;
# torch_stream_bench.py: the same model streamed layer by layer from pinned RAM) are NOT in this
# repository: copy them into the ignored folder .peer first and carry it:
#   mkdir -p .peer && cp /work/shared/bench/*.py .peer/      (.peer is in .git/info/exclude)
#
# Environment:
#   BIN        streamtune binary with the bench subcommand (default: build/streamtune, built
#              here with -DCMAKE_CUDA_ARCHITECTURES=90 when missing). If $(dirname BIN)/lib exists
#              it goes first on LD_LIBRARY_PATH (for a carried binary; streamtune's runs only,
#              never the peers').
#   OUT        where results go (default bench-out/): streamtune.jsonl, peft.jsonl,
#              torch_stream.jsonl, compare.json, compare.md, logs.
#   PEER_DIR   default .peer
#   DEADLINE_S wall-clock budget for the whole script (default 420): a row that would start
#              after it is skipped and reported as such, so what ran still comes back.
#   STEPS / WARMUP  timed / warm-up steps for every runner (default 5 / 2).
#   RESIDENT / STREAMED  rows, "name:seq" separated by spaces (defaults below: the speed issue's;
#              set but empty: none of that kind).
#   STREAMED_CODE12  streamed rows run again with a code12 base (--quant code12: lossless, ~24%
#              fewer bytes to stream; what `train` does by default when layers stream), into
#              streamtune.jsonl as mode "streamed code12"; default none.
#   STREAMED_NONE  streamed rows run again with --recompute none (every activation kept; the pool
#              borrows the dead saved regions: stream/prefetcher.h Note [lent activation memory]), into
#              streamtune.jsonl as mode "streamed none"; default none. (An all-streamed row with
#              recompute auto runs full recompute, as the streaming peer does: Note [bench residency].)
#   FULL       resident rows run again with --recompute full (per-layer checkpointing, the peer's
#              setting; the default rows take the planner's choice, which on a big GPU keeps every
#              activation), into streamtune_full.jsonl; default none.
#   ATTN       the same with --recompute attention (selective recompute) -> streamtune_attention.jsonl.
#   OWN_ATTN   resident rows run again with STREAMTUNE_ATTENTION=own (our attention kernels instead
#              of cuDNN's fused SDPA) -> streamtune_own_attention.jsonl; default none.
#   PEER_NOCKPT  rows for peft_bench.py with gradient checkpointing switched off (the like-for-like
#              peer of `--recompute none`) -> peft_nockpt.jsonl; default none.
#   PEER_REPS  runs of each peer row in its process (default 1); the fastest is kept and every
#              run's tok/s is recorded ("tok_s_runs"). The peer's tok/s has moved by up to ~25%
#              between device calls (RESULTS session 4), so best-of-N gives a conservative ratio.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench-out}
PEER_DIR=${PEER_DIR:-$ROOT/.peer}
DEADLINE_S=${DEADLINE_S:-420}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
PEER_REPS=${PEER_REPS:-1}
RESIDENT=${RESIDENT-"qwen2.5-0.5b:512 qwen2.5-0.5b:2048 qwen2.5-1.5b:512 qwen2.5-1.5b:2048 qwen2.5-3b:512 qwen2.5-3b:2048 llama3-8b:4096"}
STREAMED=${STREAMED-"qwen2.5-1.5b:2048 qwen2.5-3b:2048"}

if [ "${1:-}" = "--table" ]; then
  exec python3 "$HERE/compare_table.py" "${2:?usage: compare.sh --table DIR}"
fi

mkdir -p "$OUT"
START=$(date +%s)
left() { echo $((DEADLINE_S - ($(date +%s) - START))); }

BIN=${BIN:-$ROOT/build/streamtune}
if [ ! -x "$BIN" ]; then
  echo "== building $BIN"
  cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSTREAMTUNE_TESTS=OFF >"$OUT/build.log" 2>&1 &&
    cmake --build "$ROOT/build" -j"$(nproc)" --target streamtune >>"$OUT/build.log" 2>&1 ||
    { echo "build failed, see $OUT/build.log"; tail -20 "$OUT/build.log"; exit 1; }
fi
# cuBLASLt: the toolkit's, else the one in the PyTorch environment.
PIP_CUBLAS=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
ST_LIBS="$(dirname "$BIN")/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${PIP_CUBLAS:+:$PIP_CUBLAS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
st() { env LD_LIBRARY_PATH="$ST_LIBS" "$BIN" "$@"; }
st bench --help >/dev/null || { echo "streamtune binary does not start"; env LD_LIBRARY_PATH="$ST_LIBS" ldd "$BIN"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | tee "$OUT/gpu.txt"
# The host CPU too: the peer is launch-bound on small shapes, so its tok/s follows the host (RESULTS
# session 4: 1.5B@2048 8,671 and 13,070 tok/s on two calls, with the same GPU and driver).
{ lscpu 2>/dev/null | grep -E '^Model name|^CPU\(s\)|^CPU max MHz' | tr -s ' '; } | tee -a "$OUT/gpu.txt"

# A row: name seq mode -> one JSON line (or an error object) appended to FILE.
run_st() {  # name seq stream [out.jsonl [extra bench flags...]]
  local name=$1 seq=$2 stream=$3 t
  local file=${4:-streamtune.jsonl}
  shift 3; [ $# -gt 0 ] && shift
  local extra=("$@")
  t=$(left)
  if [ "$t" -lt 20 ]; then
    echo "{\"model\":\"$name\",\"seq\":$seq,\"stream\":\"$stream\",\"error\":\"skipped: deadline\"}" >>"$OUT/$file"
    return
  fi
  echo "== streamtune $name seq $seq stream $stream ${extra[*]} ($t s left)"
  local line
  line=$(timeout "$t" env LD_LIBRARY_PATH="$ST_LIBS" ${ST_ENV:-} "$BIN" bench --preset "$name" --seq "$seq" --steps "$STEPS" \
         --warmup "$WARMUP" --stream "$stream" --device cuda --json "${extra[@]}" 2>>"$OUT/streamtune.err")
  local rc=$?
  if [ $rc -eq 0 ] && [ -n "$line" ]; then
    echo "$line" >>"$OUT/$file"
    echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("   tok/s %.0f  step %.1f ms  %.1f TFLOP/s  exposed %s ms" % (r["tok_s"], r["step_ms"], r["tflops"], r["exposed_copy_ms"]))'
  else
    local err
    err=$(tail -c 300 "$OUT/streamtune.err" | tr '"\n\\' "' /")
    echo "{\"model\":\"$name\",\"seq\":$seq,\"stream\":\"$stream\",\"error\":\"rc $rc: $err\"}" >>"$OUT/$file"
    echo "   failed (rc $rc)"
  fi
}

: >"$OUT/streamtune.jsonl"
for row in $RESIDENT; do run_st "${row%%:*}" "${row##*:}" off; done
for row in $STREAMED; do run_st "${row%%:*}" "${row##*:}" ram; done
for row in ${STREAMED_CODE12:-}; do run_st "${row%%:*}" "${row##*:}" ram streamtune.jsonl --quant code12; done
for row in ${STREAMED_NONE:-}; do run_st "${row%%:*}" "${row##*:}" ram streamtune.jsonl --recompute none; done
: >"$OUT/streamtune_full.jsonl"
for row in ${FULL:-}; do run_st "${row%%:*}" "${row##*:}" off streamtune_full.jsonl --recompute full; done
: >"$OUT/streamtune_own_attention.jsonl"
for row in ${OWN_ATTN:-}; do
  ST_ENV=STREAMTUNE_ATTENTION=own run_st "${row%%:*}" "${row##*:}" off streamtune_own_attention.jsonl
done
: >"$OUT/streamtune_attention.jsonl"
for row in ${ATTN:-}; do run_st "${row%%:*}" "${row##*:}" off streamtune_attention.jsonl --recompute attention; done

# Peers: one Python process each (imports are slow), rows in the same order, JSON lines on stdout.
peer_rows() {  # module fn file rows...
  local mod=$1 file=$2; shift 2
  local t
  t=$(left)
  if [ "$t" -lt 30 ]; then echo "== skipping $mod: deadline"; return; fi
  echo "== $mod ($t s left)"
  PYTHONUNBUFFERED=1 timeout "$t" python3 - "$PEER_DIR" "$mod" "$STEPS" "$WARMUP" "$PEER_REPS" "$@" <<'PY' | tee "$OUT/$file"
import json, sys, traceback
peer_dir, mod, steps, warm, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = sys.argv[6:]
sys.path.insert(0, peer_dir)
import torch
nockpt = mod == "peft_bench_nockpt"
if nockpt:  # the same script with model.gradient_checkpointing_enable() made a no-op
    import transformers
    transformers.PreTrainedModel.gradient_checkpointing_enable = lambda self, *a, **k: None
    mod = "peft_bench"
m = __import__(mod)
def once(p):
    if mod == "peft_bench":
        return m.run(p[0], int(p[1]), 1, steps=steps, warm=warm)
    return m.run(p[0], int(p[1]), p[2], steps=steps, warm=warm)
for row in rows:
    p = row.split(":")
    try:
        runs = [once(p) for _ in range(max(1, reps))]
        r = max(runs, key=lambda x: x.get("tok_s", 0))  # the peer's best run: a conservative ratio
        if len(runs) > 1:
            r["tok_s_runs"] = [x.get("tok_s") for x in runs]
    except Exception as e:  # an OOM is a result too
        traceback.print_exc(file=sys.stderr)
        r = dict(model=p[0], seq=int(p[1]), error=str(e)[:300])
        torch.cuda.empty_cache()
    print(json.dumps(r), flush=True)
PY
}
if [ -f "$PEER_DIR/peft_bench.py" ]; then
  peer_rows peft_bench peft.jsonl $RESIDENT
  : >"$OUT/peft_nockpt.jsonl"
  [ -n "${PEER_NOCKPT:-}" ] && peer_rows peft_bench_nockpt peft_nockpt.jsonl $PEER_NOCKPT
  srows=""
  for row in $STREAMED; do srows="$srows $row:streamed"; done
  [ -z "$srows" ] || peer_rows torch_stream_bench torch_stream.jsonl $srows 2>>"$OUT/peers.err"
else
  echo "no peers in $PEER_DIR (copy /work/shared/bench/*.py there and carry it)"
fi

python3 "$HERE/compare_table.py" "$OUT"
echo "total $(( $(date +%s) - START )) s"
