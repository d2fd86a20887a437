#!/bin/bash
# Resident vs streamed with more pool buffers (bench --stream-buffers P, recompute none, 3 warm-up
# steps): the balanced 7B / 14B rows at 2048 x 4 and the link-bound 3B@2048x1 (bench/RESULTS.md
# session 21 call 9). .devbin/pack.tar.xz as usual.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
run() {  # model seq batch stream buffers
  $B bench --preset $1 --seq $2 --batch $3 --steps 3 --warmup 3 --stream $4 --stream-buffers $5 --recompute none --json 2>/dev/null | grep '^{' > $OUT/b_$1_$3_$4_$5.json
  python3 -c "
import json; r=json.load(open('$OUT/b_$1_$3_$4_$5.json'))
print('$1@$2x$3 $4 buffers $5: step %.1f ms, loads %s, GB/step %.2f, floor %.1f ms, exposed %.1f, peak VRAM %.2f GiB, loss %s' % (r['step_ms'], r['loads_per_step'], r['bytes_streamed_per_step']/1e9, r.get('transfer_floor_ms') or 0, r.get('exposed_copy_ms') or 0, r['vram_peak_used_bytes']/2**30, r['loss_last_exact']))"
}
run qwen2.5-7b 2048 4 off 2
for p in 2 4 6; do run qwen2.5-7b 2048 4 ram $p; done
run qwen2.5-14b 2048 4 off 2
for p in 2 6 8; do run qwen2.5-14b 2048 4 ram $p; done
run qwen2.5-3b 2048 1 off 2
for p in 2 6; do run qwen2.5-3b 2048 1 ram $p; done
