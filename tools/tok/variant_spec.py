"""Tokenizer *configuration* variants for the differential fuzz (config_fuzz.py) and the
regression fixtures (make_variant_fixtures.py).

A variant is a JSON-serialisable spec (a dict) so that a failing random variant can be written
down, replayed and turned into a fixture. build(spec) trains a small BPE with HF `tokenizers`
through the spec's normalizer and pre-tokenizer (so the vocab fits the pipeline), then edits the
model options, adds the added tokens, the post-processor and the decoder. random_spec(rng) draws
the combinations real models use plus odd ones (a reader must match HF or refuse them)."""
import json
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import tok_common

BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
SCHEMES = ["always", "first", "never"]
# (pattern, is_regex) for Split; the regexes include the model-family ones our reader matches by
# hand (GPT-2, Llama-3) and general ones that go through the general matcher.
SPLIT_PATTERNS = [
    (" ", False), ("-", False), ("\u2581", False), ("ab", False), ("\n", False),
    (r"\s+", True), (r"\p{P}", True), (r"\d+", True), (r"[A-Z][a-z]*", True), (r"(?i)the", True),
    (r"\s", True), (r"'s|'t|'re", True), (r"\w+", True), (r"[^\s\w]+", True), (r" ?\p{L}+", True),
    (r"\p{N}{1,3}", True), (tok_common.GPT2_RE, True), (tok_common.LLAMA3_RE, True), (r"[\r\n]", True),
]
NORM_REPLACES = [(" ", "\u2581", False), (r"\s+", " ", True), ("a", "\u00e4", False), ("``", '"', False),
                 (r"\d", "0", True), ("  ", " ", False)]
ADDED_POOL = ["<|im_start|>", "<|im_end|>", "[INST]", "<s>", "</s>", "<tag>", "naïve cat", "hello", " world",
              "Ab", "x y", "\u2581the", "ÉCOLE", "12", "😀", "-", "'s"]


def _normalizer(n):
    k = n[0]
    if k in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"):
        return getattr(normalizers, k)()
    if k == "Strip":
        return normalizers.Strip(left=n[1], right=n[2])
    if k == "Replace":
        return normalizers.Replace(Regex(n[1]) if n[3] else n[1], n[2])
    if k == "Prepend":
        return normalizers.Prepend(n[1])
    raise ValueError(n)


def _pre(p):
    k = p[0]
    if k == "ByteLevel":
        return pre_tokenizers.ByteLevel(add_prefix_space=p[1], use_regex=p[2])
    if k == "Split":
        return pre_tokenizers.Split(Regex(p[1]) if p[2] else p[1], behavior=p[3], invert=p[4])
    if k == "Digits":
        return pre_tokenizers.Digits(individual_digits=p[1])
    if k == "Metaspace":
        return pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=p[1], split=p[2])
    if k == "Punctuation":
        return pre_tokenizers.Punctuation(behavior=p[1])
    if k == "CharDelimiterSplit":
        return pre_tokenizers.CharDelimiterSplit(p[1])
    if k in ("Whitespace", "WhitespaceSplit", "BertPreTokenizer", "UnicodeScripts"):
        return getattr(pre_tokenizers, k)()
    raise ValueError(p)


def _decoder(d):
    k = d[0]
    if k == "ByteLevel":
        return decoders.ByteLevel()
    if k == "Metaspace":
        return decoders.Metaspace(replacement="\u2581", prepend_scheme=d[1], split=d[2])
    if k == "Replace":
        return decoders.Replace(d[1], d[2])
    if k in ("ByteFallback", "Fuse"):
        return getattr(decoders, k)()
    if k == "Strip":
        return decoders.Strip(content=d[1], left=d[2], right=d[3])
    if k == "WordPiece":
        return decoders.WordPiece()
    raise ValueError(d)


def _seq(items, make, seq_cls, force_seq):
    if items is None:
        return None
    objs = [make(x) for x in items]
    if len(objs) == 1 and not force_seq:
        return objs[0]
    return seq_cls(objs)


def build(spec):
    """Returns an HF Tokenizer for `spec` (see random_spec for the fields)."""
    byte = spec["kind"] == "byte"
    tok = Tokenizer(models.BPE())
    norm = _seq(spec.get("normalizer"), _normalizer, normalizers.Sequence, spec.get("norm_seq", False))
    if norm is not None:
        tok.normalizer = norm
    pre = _seq(spec.get("pre"), _pre, pre_tokenizers.Sequence, spec.get("pre_seq", False))
    if pre is not None:
        tok.pre_tokenizer = pre
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte else []
    kw = {"limit_alphabet": spec["limit_alphabet"]} if spec.get("limit_alphabet") else {}
    trainer = trainers.BpeTrainer(vocab_size=spec.get("vocab_size", 500), min_frequency=2, show_progress=False,
                                  initial_alphabet=alphabet, **kw)
    tok.train_from_iterator(tok_common.corpus(seed=spec.get("corpus_seed", 7), n_random=spec.get("corpus_lines", 400)),
                            trainer=trainer)
    # Model options are edited in the JSON: the Python BPE constructor does not take a trained vocab.
    j = json.loads(tok.to_str())
    m = j["model"]
    mo = spec.get("model", {})
    vocab = m["vocab"]
    nxt = max(vocab.values(), default=-1) + 1
    if mo.get("unk"):
        vocab["<unk>"] = nxt
        nxt += 1
        m["unk_token"] = "<unk>"
    nbytes = {"all": 256, "partial": 128}.get(mo.get("bytes", "none"), 0)
    for b in range(nbytes):
        name = "<0x%02X>" % b
        if name not in vocab:
            vocab[name] = nxt
            nxt += 1
    m["byte_fallback"] = bool(mo.get("byte_fallback"))
    m["fuse_unk"] = bool(mo.get("fuse_unk"))
    m["ignore_merges"] = bool(mo.get("ignore_merges"))
    if mo.get("continuing_subword_prefix"):
        m["continuing_subword_prefix"] = mo["continuing_subword_prefix"]
    tok = Tokenizer.from_str(json.dumps(j))
    for a in spec.get("added", []):
        content, special, lstrip, rstrip, single_word, normalized = a
        t = AddedToken(content, single_word=single_word, lstrip=lstrip, rstrip=rstrip, normalized=normalized,
                       special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
    post = spec.get("post")
    if post is not None:
        tok.post_processor = _post(post, tok)
    dec = _seq(spec.get("decoder"), _decoder, decoders.Sequence, spec.get("dec_seq", False))
    if dec is not None:
        tok.decoder = dec
    return tok


def _post(p, tok):
    k = p[0]
    if k == "ByteLevel":
        return processors.ByteLevel(trim_offsets=False)
    if k == "Template":
        names = [w for w in p[1].split() if w != "$A"]
        return processors.TemplateProcessing(single=p[1], special_tokens=[(n, tok.token_to_id(n)) for n in set(names)])
    if k == "Roberta":
        return processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    if k == "Bert":
        return processors.BertProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    if k == "Seq":
        return processors.Sequence([_post(x, tok) for x in p[1]])
    raise ValueError(p)


def _rand_norm_step(rng):
    r = rng.randrange(10)
    if r < 6:
        return [["NFC", "NFKC", "NFD", "NFKD", "Lowercase", "StripAccents"][r]]
    if r == 6:
        return ["Strip", rng.random() < 0.7, rng.random() < 0.7]
    if r == 7 or r == 8:
        pat, content, is_re = rng.choice(NORM_REPLACES)
        return ["Replace", pat, content, is_re]
    return ["Prepend", rng.choice(["\u2581", " ", "x"])]


def _rand_split(rng):
    pat, is_re = rng.choice(SPLIT_PATTERNS)
    return ["Split", pat, is_re, rng.choice(BEHAVIORS), rng.random() < 0.25]


def _rand_plain_pre(rng):
    r = rng.randrange(9)
    if r <= 2:
        return _rand_split(rng)
    if r == 3:
        return ["Digits", rng.random() < 0.5]
    if r == 4:
        return ["Punctuation", rng.choice(BEHAVIORS)]
    if r == 5:
        return ["Whitespace"]
    if r == 6:
        return ["WhitespaceSplit"]
    if r == 7:
        return ["Metaspace", rng.choice(SCHEMES), rng.random() < 0.6]
    return rng.choice([["CharDelimiterSplit", "-"], ["BertPreTokenizer"], ["UnicodeScripts"]])


def random_spec(rng):
    byte = rng.random() < 0.5
    spec = {"kind": "byte" if byte else "char", "vocab_size": rng.choice([300, 600, 1200]),
            "corpus_seed": rng.randrange(1000)}
    r = rng.random()
    if r < 0.3:
        spec["normalizer"] = None
    elif r < 0.6:
        spec["normalizer"] = [_rand_norm_step(rng)]
    else:
        spec["normalizer"] = [_rand_norm_step(rng) for _ in range(rng.randint(1, 3))]
        spec["norm_seq"] = True
    if byte:
        bl = ["ByteLevel", rng.random() < 0.5, rng.random() < 0.5]
        r = rng.random()
        if r < 0.35:
            pre = [bl]
        elif r < 0.8:
            pre = [_rand_plain_pre(rng) for _ in range(rng.randint(1, 2))] + [bl]
        else:
            pre = [bl] + [_rand_plain_pre(rng) for _ in range(rng.randint(1, 2))]
        spec["pre"] = pre
        spec["pre_seq"] = len(pre) > 1 or rng.random() < 0.3
        spec["model"] = {"ignore_merges": rng.random() < 0.3, "byte_fallback": rng.random() < 0.05,
                         "bytes": "all" if rng.random() < 0.05 else "none"}
        dec = [["ByteLevel"]]
        r = rng.random()
        if r < 0.1:
            dec = None
        elif r < 0.15:
            dec = [["Metaspace", "always", True]]
        elif r < 0.25:
            dec = rng.choice([[["ByteLevel"], ["Replace", "a", "b"]], [["Replace", "\u0120", " "], ["ByteLevel"]],
                              [["ByteLevel"], ["Strip", " ", 1, 0]], [["Fuse"], ["ByteLevel"]], [["ByteLevel"], ["ByteLevel"]]])
        spec["decoder"] = dec
        spec["dec_seq"] = rng.random() < 0.2
    else:
        r = rng.random()
        if r < 0.25:
            spec["pre"] = None
            if spec["normalizer"] is None and rng.random() < 0.7:  # Llama-2 style
                spec["normalizer"] = [["Prepend", "\u2581"], ["Replace", " ", "\u2581", False]]
                spec["norm_seq"] = True
        elif r < 0.55:
            spec["pre"] = [["Metaspace", rng.choice(SCHEMES), rng.random() < 0.6]]
        elif r < 0.65:  # a splitter before Metaspace "first": which pieces start at input offset 0
            spec["pre"] = [_rand_plain_pre(rng), ["Metaspace", "first", rng.random() < 0.6]]
        else:
            spec["pre"] = [_rand_plain_pre(rng) for _ in range(rng.randint(1, 3))]
        spec["pre_seq"] = spec["pre"] is not None and (len(spec["pre"]) > 1 or rng.random() < 0.3)
        fb = rng.random() < 0.5
        spec["model"] = {"byte_fallback": fb, "bytes": rng.choice(["all", "all", "partial", "none"]) if fb else
                         rng.choice(["none", "none", "all"]), "unk": rng.random() < 0.6,
                         "fuse_unk": rng.random() < 0.5, "ignore_merges": rng.random() < 0.3}
        if rng.random() < 0.03:
            spec["model"]["continuing_subword_prefix"] = "##"
        if spec["model"]["byte_fallback"] and spec["model"]["bytes"] == "none":
            spec["model"]["bytes"] = "all"
        spec["limit_alphabet"] = rng.choice([None, None, 60, 150])
        r = rng.random()
        if r < 0.15:
            dec = None
        elif r < 0.35:
            dec = [["Replace", "\u2581", " "], ["ByteFallback"], ["Fuse"], ["Strip", " ", 1, 0]]
        elif r < 0.55:
            dec = [["Metaspace", rng.choice(SCHEMES), rng.random() < 0.6]]
            if rng.random() < 0.5:
                dec = [["ByteFallback"]] + dec
        else:
            pool = [["Replace", "\u2581", " "], ["Replace", " ", "_"], ["ByteFallback"], ["Fuse"],
                    # HF's Strip decoder panics when `stop` exceeds a token's length: mostly 0.
                    ["Strip", rng.choice([" ", "\u2581", "a"]), rng.randint(0, 2), rng.choice([0, 0, 0, 1])],
                    ["Metaspace", rng.choice(SCHEMES), True]]
            dec = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.04:
                dec.append(rng.choice([["ByteLevel"], ["WordPiece"]]))
        spec["decoder"] = dec
        spec["dec_seq"] = dec is not None and (len(dec) > 1 or rng.random() < 0.3)
    added = []
    for content in rng.sample(ADDED_POOL, rng.randint(0, 5)):
        special = rng.random() < 0.5
        added.append([content, special, rng.random() < 0.3, rng.random() < 0.3, rng.random() < 0.2,
                      rng.random() < (0.2 if special else 0.7)])
    r = rng.random()
    post = None
    if r < 0.2:
        post = ["Template", rng.choice(["<s> $A", "<s> $A </s>", "$A </s>"])]
    elif r < 0.3:
        post = ["Roberta"]
    elif r < 0.35:
        post = ["Bert"]
    elif r < 0.45 and byte:
        post = ["ByteLevel"]
    elif r < 0.5:
        post = ["Seq", [["ByteLevel"], ["Template", "<s> $A"]]]
    if post is not None:
        have = {a[0] for a in added}
        for n in ("<s>", "</s>"):
            if n not in have:
                added.append([n, True, False, False, False, False])
    spec["added"] = added
    spec["post"] = post
    return spec


EXTRA_CHUNKS = ["   ", "\t", "\n\n", " \n ", "  \t\n", "0", "123", "4567890", "3.14", "!?", "...", "(x)", "—",
                "中文", "日本語", "한국어", "😀", "👍🏽", "👨\u200d👩\u200d👧", "e\u0301", "A\u030a", "n\u0303",
                "ﬁ", "Ⅻ", "①", "Å", "ß", "İ", "ΣΑΣ", "\u00a0", "\u3000", "\u2581", "\u2581\u2581", "'S", "'s",
                "The", "THE", "the", "-", "--", "a-b", "ab", "x y", "\ufeff", "\u200b", "\r\n", "<0x41>", "<unk>"]


def random_text(rng, added_contents):
    """A random string: tok_common's mix plus whitespace runs, digits, CJK, emoji, combining marks
    and the variant's added tokens embedded in text (with and without surrounding space)."""
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.4:
            parts.append(tok_common.random_string(rng))
        elif r < 0.75:
            parts.append(rng.choice(EXTRA_CHUNKS))
        elif added_contents:
            c = rng.choice(added_contents)
            parts.append(rng.choice(["", " ", "  ", "a", "\n"]) + c + rng.choice(["", " ", "  ", "b", "\n"]))
        else:
            parts.append(rng.choice(tok_common.WORDS))
    return "".join(parts)


def texts_for(spec, rng, n):
    added = [a[0] for a in spec.get("added", [])]
    fixed = ["", " ", "  ", "a", " a", "a ", "\u2581", " \u2581 ", "x  \n  y", "The 123 ÉCOLE", "<s></s>"]
    return fixed + [random_text(rng, added) for _ in range(n)]


if __name__ == "__main__":
    rng = random.Random(1)
    for _ in range(3):
        print(json.dumps(random_spec(rng), ensure_ascii=False))
