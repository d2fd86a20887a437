#!/usr/bin/env python3
"""Oracle for the general split regex and HF's Split behaviors: for each pre-tokenizer spec below,
HF `tokenizers` pre-tokenizes random strings; one JSONL line per spec on stdout:
{"pre": <pre_tokenizer JSON>, "texts": [...], "pieces": [[...], ...]}.
Specs are what tokenizer.json files hold (DeepSeek-V3 / R1-distill, GPT-4o o200k, the four
families' patterns run through the general matcher, and patterns that exercise every supported
construct), each under several behaviors, plus 60 random patterns a run (random_pattern); a spec
HF refuses is written as {"pre", "hf_error"} and must be refused by us too. Normalizers (NFD, NFKC,
Lowercase, Strip, StripAccents, Replace with a Regex, ...) come first as {"norm", "texts", "out"}.
Used by tests/data/split_regex_live_test.cc.
Usage: split_check.py SEED COUNT"""
import json
import os
import random
import sys

try:
    from tokenizers import Regex, pre_tokenizers
except ImportError as e:
    sys.stderr.write("python3 cannot import '%s': run tools/install_deps.sh\n" % e.name)
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common  # noqa: E402

DEEPSEEK_V3 = [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+",
               r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Patterns checked under every behavior, with and without invert.
ALL_BEHAVIORS = [tok_common.LLAMA3_RE, r"\s+", r"a*", r"\p{P}", r"x*?y?"]
# Patterns checked Isolated (and Removed + invert, which keeps only the matches).
PATTERNS = DEEPSEEK_V3 + [O200K] + ["(?:%s)" % p for p in (tok_common.GPT2_RE, tok_common.LLAMA3_RE,
                                                             tok_common.QWEN2_RE, tok_common.TEKKEN_RE)] + [
    r"\d+|\w+|\s+", r"(?i)[a-z]+|\p{Lu}\p{Ll}*", r"\b\w+\b", r"^\s+|\s+$", r"(?<=\s)\p{L}+",
    r"(?<![\p{L}])\d{2,}", r"\p{S}+|\p{Zs}", r"(?>\p{L}+)\p{L}", r"\p{L}++|\p{N}*+", r"[^\p{L}\p{N}\s]+",
    r"\h+|\H", r"[\x{4e00}-\x{9fff}\u3040-\u30ff]+", r".", r"(?m:.)+?\n", r"\A\p{L}|\z", r"\S+\Z",
    r"'(?i:s|t|re)", r"(?i)k+", r"(?i:[a-z])+", r"[\-\]\\/]+", r"a{2,3}|b{,2}c|d{2}|e{2,}", r"\W+|\D",
    r"(?<=a|bc)\p{L}|(?<!x|yz)\d", r"(?=\p{Lu})\p{L}{2}|\p{Lo}{1,2}?", r"\p{Letter}+|\p{Decimal_Number}|\p{^L}",
    r"\P{N}+?\p{N}", r"[\s\S]{3}", r"(\p{L}+)(?:\s)|(?#note)z", r"(?<w>\p{Ll})+|\p{Cc}+|\p{Cf}", r"\x41|\u00e9|\t|\n",
    r"x(?i)a|b", r"(?i:x)a|\p{M}+", r"[\p{Ll}&]|\p{Lt}|\p{Lm}", r"\s*[\r\n]+|\s+(?!\S)", r"[^\s]+", r"\p{Any}{2}",
    r"\p{ASCII}+|\p{Word}+|\p{Space}", r"[:\[]+|\p{XDigit}{2}", r"\p{Nl}|\p{No}|\p{Sc}|\p{Sk}|\p{Sm}|\p{So}|\p{Pd}",
    r"(a|ab)(c|bcd)(d*)", r"(?:\p{L}|\p{N})*\p{P}", r" ?[^(\s|[.,!?…。，、।۔،])]+",
]


BEHAVIORS = ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"]


def split(pattern, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}


def specs():
    out = []
    for p in ALL_BEHAVIORS:
        for b in BEHAVIORS:
            for inv in (False, True):
                out.append(split(p, b, inv))
    for p in PATTERNS:
        out.append(split(p))
        out.append(split(p, "Removed", True))
    out.append({"type": "Sequence", "pretokenizers": [split(p) for p in DEEPSEEK_V3]})
    for b in BEHAVIORS:
        out.append({"type": "Punctuation", "behavior": b})
        out.append({"type": "Split", "pattern": {"String": " "}, "behavior": b, "invert": False})
    out += [{"type": "Whitespace"}, {"type": "WhitespaceSplit"}, {"type": "CharDelimiterSplit", "delimiter": "x"},
            {"type": "Split", "pattern": {"String": ""}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"String": "ab"}, "behavior": "MergedWithNext", "invert": True}]
    return out


def random_pattern(rng, depth=0):
    """A random regex from the constructs the general matcher supports (ids must agree with HF)."""
    def atom():
        r = rng.random()
        if depth < 3 and r < 0.18:
            inner = random_pattern(rng, depth + 1)
            return rng.choice(["(%s)", "(?:%s)", "(?i:%s)", "(?>%s)", "(?=%s)", "(?!%s)", "(?m:%s)"]) % inner
        if r < 0.22:
            return rng.choice(["(?<=a)", "(?<!\\s)", "(?<=\\p{L}|12)", "^", "$", "\\b", "\\B", "\\A", "\\z", "\\Z"])
        if r < 0.45:
            return rng.choice(["a", "b", " ", "\\n", "1", "é", "K", "'", "x", "\\.", "-", "中"])
        if r < 0.75:
            return rng.choice(["\\s", "\\S", "\\d", "\\D", "\\w", "\\W", "\\h", "\\p{L}", "\\p{N}", "\\p{P}",
                               "\\p{S}", "\\p{Lu}", "\\p{Ll}", "\\P{L}", "\\p{^N}", "\\p{M}", "\\p{Zs}", "."])
        return rng.choice(["[ab]", "[^a\\s]", "[\\p{L}\\d]", "[a-c1-3]", "[^\\p{L}\\p{N}\\s]", "[\\r\\n]", "[k-m]",
                           "[^()|\\s[.,!]]", "[\\w-]", "[^]x]", "[一-龥]", "[\\x{41}-\\x{5A}]"])
    def piece():
        a = atom()
        if rng.random() < 0.45 and not a.startswith(("(?=", "(?!", "(?<", "^", "$", "\\b", "\\B", "\\A", "\\z", "\\Z")):
            a += rng.choice(["*", "+", "?", "{1,3}", "{2}", "{,2}", "{2,}", "*?", "+?", "??", "{1,2}?", "*+", "++", "?+"])
        return a
    alts = []
    for _ in range(rng.randint(1, 3)):
        alts.append("".join(piece() for _ in range(rng.randint(1, 4))))
    return "|".join(alts)


NORMALIZERS = [{"type": t} for t in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents")] + [
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Strip", "strip_left": True, "strip_right": False},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
    {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
    {"type": "Replace", "pattern": {"Regex": r"\p{Zs}|\t"}, "content": "\u2581"},
    {"type": "Replace", "pattern": {"Regex": r"[0-9]{2,}|x+?"}, "content": "<n>"},
    {"type": "Replace", "pattern": {"String": "  "}, "content": " "},
]
COMPAT = "ﬁ ﬂ ½ ² ㎏ Ａｂ ｶﾞ ① ℌ ǅ ß ẞ İ ΣσςΣ Å Ω K ﬀ ᾈ ǰ ŉ \u00a0x\u3000y \u0345 é"


def hf_component(key, spec):
    """`spec` as tokenizers builds it from a tokenizer.json's `key` (pre_tokenizer / normalizer)."""
    from tokenizers import Tokenizer
    tj = {"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}, key: spec}
    return getattr(Tokenizer.from_str(json.dumps(tj)), key)


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    extra = ["abcbcd x yz aa ab", "ſ's 'S 'ſ K k", "\r\n\r\n  \n", "12 345 6789 ab12 x1", "中文字 ひらがな カタカナ"]
    random_specs = [split(random_pattern(rng), rng.choice(BEHAVIORS), rng.random() < 0.3) for _ in range(60)]
    for spec in NORMALIZERS:
        norm = hf_component("normalizer", spec)
        texts = [COMPAT, " \t lead and trail \n "] + [tok_common.random_string(rng, with_specials=False) for _ in range(count)] + [""]
        rec = {"norm": spec, "texts": texts, "out": [norm.normalize_str(t) for t in texts]}
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
    fixed = specs()
    n_fixed = len(fixed)
    for k, spec in enumerate(fixed + random_specs):
        try:
            pre = hf_component("pre_tokenizer", spec)
        except Exception as e:  # HF refuses the pattern: so must we
            sys.stdout.write(json.dumps({"pre": spec, "hf_error": str(e)}, ensure_ascii=False) + "\n")
            continue
        texts = extra + [tok_common.random_string(rng, with_specials=False) for _ in range(count)] + [""]
        try:
            pieces = [[p for p, _ in pre.pre_tokenize_str(t)] for t in texts]
        except BaseException as e:  # noqa: B036 -- Oniguruma's retry limit panics (nested random quantifiers):
            if "retry-limit" not in str(e):  # HF has no answer to compare with, so the spec is dropped
                raise
            continue
        rec = {"pre": spec, "texts": texts, "pieces": pieces}
        if k >= n_fixed:
            rec["random"] = True  # may be refused by name (e.g. a repeat of something that can match empty)
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
