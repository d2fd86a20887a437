#!/usr/bin/env python3
"""Differential fuzz over tokenizer *configurations*: random tokenizer.json variants
(variant_spec.random_spec: normalizers, pre-tokenizers, BPE options, added-token flags,
post-processors, decoders) built with HF `tokenizers`, each run on many random strings by HF and
by ours (tools/tok/tok_batch.cc, built here against a CMake build dir's static libraries), comparing
encode(text) ids and decode(ids, skip_special_tokens=False).

Outcome per variant: ok | refused (our reader gives an error naming the component: fine) |
mismatch | crash | timeout (bugs) | hf_error (HF itself rejected the spec; not counted).
Mismatching variants are written to OUT/fail_NNN.json with the spec, the tokenizer.json and the
first failing texts shrunk to a minimal failing form, so they can be replayed (--replay FILE).

Usage: config_fuzz.py --build-dir /tmp/tokbuild [--variants 200] [--texts 150] [--seed 1] [--out DIR] 2>/dev/null
       config_fuzz.py --build-dir /tmp/tokbuild --replay OUT/fail_003.json
(HF prints a backtrace to stderr for each of its own panics -- its Strip decoder, some trainers --
hence 2>/dev/null.) The build dir needs the st_data target built (libst_{data,io,core}.a)."""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variant_spec  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def build_driver(build_dir):
    """Compiles tok_batch.cc against BUILD/libst_{data,io,core}.a (rebuilt when any is newer)."""
    exe = os.path.join(build_dir, "tok_batch")
    src = os.path.join(ROOT, "tools", "tok", "tok_batch.cc")
    libs = [os.path.join(build_dir, "libst_%s.a" % m) for m in ("data", "io", "core")]
    for lib in libs:
        if not os.path.exists(lib):
            sys.exit("missing %s: build the st_data target first (ninja -C %s st_data)" % (lib, build_dir))
    if os.path.exists(exe) and all(os.path.getmtime(exe) > os.path.getmtime(p) for p in libs + [src]):
        return exe
    cmd = ["c++", "-std=c++20", "-O2", "-I", os.path.join(ROOT, "src"), src] + libs + ["-lpthread", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


def hf_results(tok, texts):
    """(ids, decoded) per text, or None where HF itself panics (its Strip decoder indexes out of
    bounds when `stop` exceeds a token's length): nothing to compare with there."""
    out = []
    for t in texts:
        try:
            ids = tok.encode(t).ids
            out.append((ids, tok.decode(ids, skip_special_tokens=False)))
        except BaseException as e:  # pyo3's PanicException derives from BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
            out.append(None)
    return out


def ours(exe, tok_path, texts, timeout=120):
    """-> ("refused", msg) | ("crash", msg) | ("timeout", "") | ("ok", [(ids, decoded_bytes)])."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
        texts_path = f.name
    try:
        p = subprocess.run([exe, tok_path, texts_path], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    finally:
        os.unlink(texts_path)
    if p.returncode != 0:
        return "crash", "rc %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace")[-2000:])
    lines = p.stdout.decode("utf-8").splitlines()
    head = json.loads(lines[0])
    if "error" in head:
        return "refused", head["error"]
    res = [json.loads(x) for x in lines[1:]]
    if len(res) != len(texts):
        return "crash", "%d results for %d texts" % (len(res), len(texts))
    return "ok", [(r["ids"], bytes.fromhex(r["dec"])) for r in res]


def differs(h, o):
    if h is None:
        return False
    return h[0] != o[0] or h[1].encode("utf-8", "surrogatepass") != o[1]


def shrink(exe, tok, tok_path, text):
    """Greedy delta-debugging: drops chunks of code points while HF and ours still differ (each
    round is one batch call)."""
    for _ in range(200):
        cands = []
        for k in (16, 8, 4, 2, 1):
            if k > len(text):
                continue
            cands += [text[:i] + text[i + k:] for i in range(0, len(text) - k + 1, max(1, k // 2))]
        cands = list(dict.fromkeys(c for c in cands if c != text))
        if not cands:
            break
        kind, res = ours(exe, tok_path, cands)
        if kind != "ok":
            break
        hf = hf_results(tok, cands)
        nxt = next((c for c, h, o in zip(cands, hf, res) if differs(h, o)), None)
        if nxt is None:
            break
        text = nxt
    return text


def run_variant(exe, spec, texts, out_dir, idx):
    try:
        tok = variant_spec.build(spec)
    except Exception as e:  # HF refused the combination itself
        return "hf_error", repr(e)
    with tempfile.TemporaryDirectory() as d:
        tok_path = os.path.join(d, "tokenizer.json")
        tok.save(tok_path)
        kind, res = ours(exe, tok_path, texts)
        if kind != "ok":
            if kind in ("crash", "timeout") and out_dir:
                dump(out_dir, idx, spec, tok, kind, [{"note": res}])
            return kind, res
        hf = hf_results(tok, texts)
        bad = [(t, h, o) for t, h, o in zip(texts, hf, res) if differs(h, o)]
        if not bad:
            return "ok", sum(h is None for h in hf)
        cases = []
        for t, _, _ in bad[:3]:
            s = shrink(exe, tok, tok_path, t)
            _, r = ours(exe, tok_path, [s])
            h = hf_results(tok, [s])[0] or ([], "")
            cases.append({"text": s, "orig": t, "hf_ids": h[0], "hf_dec": h[1], "our_ids": r[0][0],
                          "our_dec": r[0][1].decode("utf-8", "replace")})
        if out_dir:
            dump(out_dir, idx, spec, tok, "mismatch", cases)
        return "mismatch", "%d/%d texts differ; e.g. %s" % (len(bad), len(texts), json.dumps(cases[0], ensure_ascii=False))


def isolated(fn, *args):
    """Runs fn in a forked child: HF `tokenizers` aborts the whole process on some configurations
    (a panic at the FFI boundary after an invalid-UTF-8 token from ByteLevel-then-Split), and one
    such variant must not end the fuzz. -> fn's (kind, msg), or ("hf_error", why)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = fn(*args)
        except BaseException as e:  # noqa: B036 (the child must report, whatever happened)
            res = ("hf_error", repr(e)[:300])
        with os.fdopen(w, "w") as f:
            json.dump(res, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return "hf_error", "the HF side died (status %d)" % status
    return tuple(json.loads(data))


def dump(out_dir, idx, spec, tok, kind, cases):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "fail_%03d.json" % idx), "w", encoding="utf-8") as f:
        json.dump({"kind": kind, "spec": spec, "tokenizer": json.loads(tok.to_str()), "cases": cases}, f,
                  ensure_ascii=False, indent=1)


def summarize_spec(spec):
    def names(items):
        return "+".join(x[0] for x in items) if items else "-"
    return "%s norm=%s pre=%s dec=%s post=%s model=%s added=%d" % (
        spec["kind"], names(spec.get("normalizer")), names(spec.get("pre")), names(spec.get("decoder")),
        spec["post"][0] if spec.get("post") else "-",
        ",".join(k for k, v in spec.get("model", {}).items() if v and v != "none"), len(spec.get("added", [])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--variants", type=int, default=200)
    ap.add_argument("--texts", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="where failing variants are written")
    ap.add_argument("--replay", default=None, help="a fail_NNN.json (or spec JSON) to rerun")
    ap.add_argument("-v", action="store_true", help="print every variant")
    args = ap.parse_args()
    exe = build_driver(args.build_dir)
    if args.replay:
        with open(args.replay, encoding="utf-8") as f:
            rec = json.load(f)
        spec = rec.get("spec", rec)
        texts = [c["text"] for c in rec.get("cases", []) if "text" in c]
        texts += variant_spec.texts_for(spec, random.Random(args.seed), args.texts)
        print(run_variant(exe, spec, texts, None, 0))
        return 0
    counts = collections.Counter()
    refusals = collections.Counter()
    hf_errors = collections.Counter()
    bugs = []
    for i in range(args.variants):
        rng = random.Random(args.seed * 100003 + i)
        spec = variant_spec.random_spec(rng)
        texts = variant_spec.texts_for(spec, rng, args.texts)
        kind, msg = isolated(run_variant, exe, spec, texts, args.out, i)
        counts[kind] += 1
        if kind == "refused":
            # Group refusals by message with the file path cut off.
            refusals[msg.split(": ", 2)[-1][:120]] += 1
        if kind == "hf_error":
            hf_errors[msg[:120]] += 1
        if kind in ("mismatch", "crash", "timeout"):
            bugs.append((i, kind, summarize_spec(spec), msg))
        if args.v or kind in ("mismatch", "crash", "timeout"):
            print("[%d] %s %s %s" % (i, kind, summarize_spec(spec), msg[:300] if kind != "ok" else ""), flush=True)
    print("\nvariants: %d  %s" % (args.variants, dict(counts)))
    print("refusals:")
    for m, c in refusals.most_common():
        print("  %4d  %s" % (c, m))
    if hf_errors:
        print("HF rejected the spec itself (not counted):")
        for m, c in hf_errors.most_common():
            print("  %4d  %s" % (c, m))
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
