# Sourced by the device scripts that run `streamtune bench` rows side by side (attention_plan_call,
# launch_floor_call, extras_call, code12_call). Not a script of its own.

# bench_setup: unpacks .devbin/pack.tar.xz, puts its lib/ on the library path, starts F=$OUT/rows.jsonl.
bench_setup() {
  tar xJf .devbin/pack.tar.xz -C .devbin
  export LD_LIBRARY_PATH=$PWD/.devbin/lib
  F=$OUT/rows.jsonl
  : > "$F"
}

# bench_row FILE BUILD LABEL ARGS...: one `.devbin/BUILD bench --device cuda --json ARGS` line (BENCH_DEVICE=cpu: a local check)
# appended to FILE with "build" and "label" added, or an error line naming the row.
bench_row() {
  local file=$1 build=$2 label=$3; shift 3
  local err line
  err=$(mktemp)
  line=$(.devbin/$build bench --device "${BENCH_DEVICE:-cuda}" --json "$@" 2>$err)
  if [ -n "$line" ]; then echo "{\"build\":\"$build\",\"label\":\"$label\",${line#\{}" >> "$file"
  else echo "{\"build\":\"$build\",\"label\":\"$label\",\"error\":\"$(tail -c 300 $err | tr '\"\n' "' ")\"}" >> "$file"; fi
  rm -f "$err"
}

# print_rows FILE: a line per row (step, plan and the loss bits); the floor when the link was measured.
print_rows() {
  python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "error" in r:
        print("ERROR", r); continue
    gb = r["bytes_streamed_per_step"] / 1e9
    link = r.get("h2d_pinned_gbps") or 0
    floor = " floor %.1f ms" % (1e3 * gb / link) if link else ""
    print("%-15s %-24s %-12s %5d %-4s %-6s step %7.1f ms  tok/s %7.0f  resident %2s  replays %3s eager %3s  "
          "exposed %6s  extras %-5s  %5.2f GB%s  attn %s  loss %s" % (
        r["build"], r["label"], r["model"], r["seq"], r["stream"], r["quant"], r["step_ms"], r["tok_s"],
        r.get("resident_layers"), r.get("plan_replays_per_step"), r.get("eager_visits_per_step"),
        r.get("exposed_copy_ms"), "host" if r.get("offload_embeddings") else "dev", gb, floor, r.get("attention"),
        r.get("loss_last_exact")))
PY
}
