#!/usr/bin/env python3
"""Oracle for the general split regex and HF's Split behaviors: for each pre-tokenizer spec below,
HF `tokenizers` pre-tokenizes random strings; one JSONL line per spec on stdout:
{"pre": <pre_tokenizer JSON>, "texts": [...], "pieces": [[...], ...]}.
Specs are what tokenizer.json files hold (DeepSeek-V3 / R1-distill, GPT-4o o200k, the four
families' patterns run through the general matcher, and patterns that exercise every supported
construct), each under several behaviors. Used by tests/data/split_regex_live_test.cc.
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
    r"(a|ab)(c|bcd)(d*)", r"(?:\p{L}|\p{N})*\p{P}",
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


def hf_pre(spec):
    """The spec as a tokenizers pre-tokenizer, built from its JSON as tokenizer.json is read."""
    from tokenizers import Tokenizer
    tj = {"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": spec}
    return Tokenizer.from_str(json.dumps(tj)).pre_tokenizer


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    extra = ["abcbcd x yz aa ab", "ſ's 'S 'ſ K k", "\r\n\r\n  \n", "12 345 6789 ab12 x1", "中文字 ひらがな カタカナ"]
    for spec in specs():
        pre = hf_pre(spec)
        texts = extra + [tok_common.random_string(rng, with_specials=False) for _ in range(count)] + [""]
        pieces = [[p for p, _ in pre.pre_tokenize_str(t)] for t in texts]
        sys.stdout.write(json.dumps({"pre": spec, "texts": texts, "pieces": pieces}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
