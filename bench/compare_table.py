"""Joins the JSON lines of bench/compare.sh into one side-by-side table (markdown on stdout,
compare.md and compare.json in the same folder).

usage: python3 bench/compare_table.py DIR   (DIR holds streamtune.jsonl, peft.jsonl, torch_stream.jsonl)

Rows are keyed by (model, seq, mode): mode "resident" pairs `streamtune bench --stream off` with
peft_bench.py; mode "streamed" pairs `--stream ram` with torch_stream_bench.py (streamed mode).
ratio = streamtune tok/s / peer tok/s (> 1: streamtune is faster).
Memory: streamtune's figure is the bytes it allocated (arenas, LoRA, extras, layers, pool);
the peers' is torch.cuda.max_memory_allocated. Neither includes the CUDA context.
"""
import json
import os
import sys


def load(path):
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def recompute_table(d, st, peft):
    """Resident rows by recompute mode, against the peer with and without gradient checkpointing."""
    runs = {}
    for f in ("streamtune.jsonl", "streamtune_full.jsonl", "streamtune_attention.jsonl"):
        for r in load(os.path.join(d, f)):
            if r.get("stream") == "off" and "error" not in r:
                runs.setdefault((r["model"], r["seq"]), {})[r.get("recompute", "?")] = r["tok_s"]
    nock = {(r["model"], r["seq"]): r for r in load(os.path.join(d, "peft_nockpt.jsonl"))}
    if not any(len(v) > 1 for v in runs.values()) and not nock:
        return ""
    lines = ["", "", "| model | seq | st full | st attention | st none | peer (ckpt) | peer (no ckpt) | "
             "full / peer | none / peer | none / peer no ckpt |", "|" + " --- |" * 10]
    for key, modes in runs.items():
        p, q = peft.get(key, {}), nock.get(key, {})
        pt, qt = p.get("tok_s"), q.get("tok_s")
        f, a, n = modes.get("full"), modes.get("attention"), modes.get("none")
        ratio = lambda x, y: (x / y) if x and y else None
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], fmt(f, "%.0f"), fmt(a, "%.0f"), fmt(n, "%.0f"), fmt(pt, "%.0f"),
            fmt(qt, "%.0f") if qt else (q.get("error", "-")[:40] if q else "-"),
            fmt(ratio(f, pt), "%.2f"), fmt(ratio(n, pt), "%.2f"), fmt(ratio(n, qt), "%.2f")))
    return "\n".join(lines)


def main(d):
    st = load(os.path.join(d, "streamtune.jsonl"))
    peft = {(r["model"], r["seq"]): r for r in load(os.path.join(d, "peft.jsonl"))}
    tsb = {(r["model"], r["seq"]): r for r in load(os.path.join(d, "torch_stream.jsonl"))}
    out = []
    for r in st:
        mode = "resident" if r.get("stream") == "off" else "streamed"
        if r.get("quant", "none") != "none":  # a coded base (bench --quant): its own row, the same peer
            mode += " " + r["quant"]
        if mode == "streamed" and r.get("recompute") == "none":  # STREAMED_NONE: its own row, the same peer
            mode += " none"
        peer = (peft if mode == "resident" else tsb).get((r["model"], r["seq"]), {})
        ok, pok = "error" not in r, "error" not in peer and "tok_s" in peer
        row = dict(model=r["model"], seq=r["seq"], mode=mode,
                   st_tok_s=r.get("tok_s") if ok else None, peer_tok_s=peer.get("tok_s") if pok else None,
                   st_step_ms=r.get("step_ms"), peer_step_ms=peer["step_s"] * 1e3 if pok else None,
                   st_tflops=r.get("tflops"), st_tflops_attn=r.get("tflops_with_attn"),
                   peer_tflops=peer.get("tflops_seed_convention"),
                   st_gib=r["vram_allocated_bytes"] / 2**30 if ok else None, peer_gib=peer.get("peak_gib"),
                   st_loss=r.get("loss_last"), peer_loss=peer.get("loss"),
                   gemm_ceiling=r.get("gemm_ceiling_tflops"), link_gbps=r.get("h2d_pinned_gbps"),
                   streamed_gb=r["bytes_streamed_per_step"] / 1e9 if ok else None,
                   stream_gbps=r.get("stream_gbps"), exposed_ms=r.get("exposed_copy_ms"),
                   compute_fraction=r.get("compute_fraction"),
                   st_error=r.get("error"), peer_error=peer.get("error") if peer else "not run")
        row["ratio"] = (row["st_tok_s"] / row["peer_tok_s"]) if row["st_tok_s"] and row["peer_tok_s"] else None
        out.append(row)
    head = ("| model | seq | mode | streamtune tok/s | peer tok/s | ratio | step ms (st / peer) | TFLOP/s st "
            "(+attn) / peer | GiB st / peer | loss st / peer | streamed GB/step, GB/s | exposed ms | "
            "GEMM ceiling, link |")
    lines = [head, "|" + " --- |" * 13]
    for w in out:
        note = ""
        if w["st_error"]:
            note += " st: " + w["st_error"][:80]
        if w["peer_error"] and w["peer_error"] != "not run":
            note += " peer: " + w["peer_error"][:80]
        lines.append("| %s | %d | %s | %s | %s | %s | %s / %s | %s (%s) / %s | %s / %s | %s / %s | %s, %s | %s | %s, %s |%s" % (
            w["model"], w["seq"], w["mode"], fmt(w["st_tok_s"], "%.0f"), fmt(w["peer_tok_s"], "%.0f"),
            fmt(w["ratio"], "%.2f"), fmt(w["st_step_ms"]), fmt(w["peer_step_ms"]), fmt(w["st_tflops"]),
            fmt(w["st_tflops_attn"]), fmt(w["peer_tflops"]), fmt(w["st_gib"], "%.2f"), fmt(w["peer_gib"], "%.2f"),
            fmt(w["st_loss"], "%.3f"), fmt(w["peer_loss"], "%.3f"), fmt(w["streamed_gb"], "%.2f"),
            fmt(w["stream_gbps"]), fmt(w["exposed_ms"]), fmt(w["gemm_ceiling"], "%.0f"), fmt(w["link_gbps"]),
            note))
    text = "\n".join(lines) + recompute_table(d, st, peft)
    print(text)
    with open(os.path.join(d, "compare.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(d, "compare.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench-out")
