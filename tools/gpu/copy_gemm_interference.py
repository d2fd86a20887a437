# GEMM throughput alone and beside a stream of pinned host->device copies (466 MB, one 7B layer),
# whole and in 64 / 8 / 2 MiB chunks: does a copy slow the GEMMs beside it? (bench/RESULTS.md session
# 21 call 8). Run with the torch on the device: /opt/torch/.venv/bin/python tools/gpu/copy_gemm_interference.py
import torch, time
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
M, K, N = 8192, 3584, 18944   # ~7B MLP shape: 8192 tokens x 3584 -> 18944
a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
host = torch.empty(466 * 2**20, dtype=torch.uint8).pin_memory()
dst = torch.empty_like(host, device=dev)
s_gemm = torch.cuda.Stream()
s_copy = torch.cuda.Stream()
lo, hi = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)
s_copy_lo = torch.cuda.Stream(priority=0)
def gemms(n):
    with torch.cuda.stream(s_gemm):
        for _ in range(n): torch.mm(a, b)
def copies(n, chunk, stream):
    with torch.cuda.stream(stream):
        for _ in range(n):
            if chunk == 0:
                dst.copy_(host, non_blocking=True)
            else:
                for o in range(0, host.numel(), chunk):
                    dst[o:o+chunk].copy_(host[o:o+chunk], non_blocking=True)
def timed(fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize(); return (time.perf_counter() - t) * 1e3
gemms(5); copies(2, 0, s_copy); torch.cuda.synchronize()
flop = 2 * M * K * N
G = 60
tg = timed(lambda: gemms(G))
print(f"gemm alone: {tg:.1f} ms, {flop*G/tg/1e9:.0f} TFLOP/s")
for chunk in [0, 64 * 2**20, 8 * 2**20, 2 * 2**20]:
    C = 1
    tc = timed(lambda: copies(C, chunk, s_copy))
    # enough copies to span the GEMMs
    C = max(1, int(tg / tc))
    tc = timed(lambda: copies(C, chunk, s_copy))
    e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    def both():
        s_copy.wait_stream(torch.cuda.current_stream()); s_gemm.wait_stream(torch.cuda.current_stream())
        e[0].record(s_copy); copies(C, chunk, s_copy); e[1].record(s_copy)
        e[2].record(s_gemm); gemms(G); e[3].record(s_gemm)
    tb = timed(both)
    tcb, tgb = e[0].elapsed_time(e[1]), e[2].elapsed_time(e[3])
    print(f"chunk {chunk>>20 if chunk else 'whole'} MiB: copies alone {tc:.1f} ms ({C*host.numel()/tc/1e6:.1f} GB/s), "
          f"both {tb:.1f} ms = {tb/max(tg,tc):.3f} x max; gemm stream {tgb:.1f} ms (+{(tgb/tg-1)*100:.1f}%), copy stream {tcb:.1f} ms (+{(tcb/tc-1)*100:.1f}%)")
