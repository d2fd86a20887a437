#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizers/variants/*.json for tests/data/tokenizer_config_variants_test.cc:
one small tokenizer per configuration that tools/tok/config_fuzz.py found us getting wrong, with
HF `tokenizers`' ids (encode, add_special_tokens=True) and decode(ids, skip_special_tokens=False)
for texts that hit the case. Each file: {"what", "tokenizer": <tokenizer.json>, "cases":
[{"text", "ids", "decoded"}]}. Usage: make_variant_fixtures.py [OUT_DIR]"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variant_spec  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BL = ["ByteLevel", False, True]  # ByteLevel(add_prefix_space=False, use_regex=True)


def added(content, special=False, lstrip=False, rstrip=False, single_word=False, normalized=None):
    return [content, special, lstrip, rstrip, single_word, (not special) if normalized is None else normalized]


# name -> (what it pins, spec, texts). Small vocabularies keep the files a few KB each.
FIXTURES = {
    "bytelevel_decode_added": (
        "ByteLevel decoder runs on added tokens too: chars of the byte map become bytes ('ÉCOLE' -> "
        "invalid UTF-8 -> U+FFFD), others stay as written; all tokens are read as UTF-8 together",
        {"kind": "byte", "vocab_size": 320, "pre": [BL], "decoder": [["ByteLevel"]],
         "added": [added("ÉCOLE", normalized=False), added("©", normalized=False), added("a b"),
                   added("<s>", special=True)]},
        ["ÉCOLE", "x ÉCOLE y", "\u00c3©", "é©", "a b", "<s>ÉCOLE<s>", "😀ÉCOLEa b"]),
    "bytelevel_null_decoder": (
        "a byte-level model with \"decoder\": null decodes as HF: token strings joined with ' '",
        {"kind": "byte", "vocab_size": 320, "pre": [BL], "decoder": None, "added": [added("<s>", special=True)]},
        ["hello world", " a  b", "<s>x", "é"]),
    "bytelevel_normalized_added": (
        "a normalized added token decodes as its normalized content (Prepend 'x' + Lowercase: ' WORLD' -> "
        "'x world'), for byte-level models too",
        {"kind": "byte", "vocab_size": 320, "normalizer": [["Prepend", "x"], ["Lowercase"]], "norm_seq": True,
         "pre": [BL], "decoder": [["ByteLevel"]], "added": [added(" WORLD")]},
        [" WORLD", "a WORLD", "WORLD", " world"]),
    "added_rstrip_overlap": (
        "after an rstrip match the next added-token match is searched from the end of the match proper, "
        "so a token starting with a space still matches there (HF find_matches)",
        {"kind": "byte", "vocab_size": 320, "pre": [BL], "decoder": [["ByteLevel"]],
         "added": [added("</s>", rstrip=True), added(" world"), added("12", special=True, rstrip=True)]},
        ["</s> world", "</s>  world", "12 world", "12  world!", "a</s> worlds"]),
    "added_rstrip_overlap_prepend": (
        "as added_rstrip_overlap, on normalized text: Prepend(' ') makes '<s>' match as ' <s>'",
        {"kind": "char", "vocab_size": 300, "normalizer": [["Prepend", " "], ["NFKC"]], "norm_seq": True,
         "pre": [["Metaspace", "always", True]], "model": {"byte_fallback": True, "bytes": "all"},
         "decoder": [["ByteFallback"], ["Metaspace", "always", True]],
         "added": [added("<s>", rstrip=True), added("'s")]},
        ["<s> <s>", "<s> 's", "<s>  <s> x"]),
    "added_single_word_unicode": (
        "single_word checks Rust's Unicode \\w next to the match: emoji, NBSP, '—', '▁' are not word "
        "chars (they were taken as such for any non-ASCII byte); a failed single_word match is dropped "
        "without trying a shorter token at its position",
        {"kind": "char", "vocab_size": 300, "pre": [["Metaspace", "always", True]],
         "model": {"byte_fallback": True, "bytes": "all", "unk": True}, "decoder": [["ByteFallback"], ["Fuse"]],
         "added": [added("[INST]", special=True, single_word=True), added("'s", special=True, lstrip=True,
                                                                            single_word=True, normalized=False),
                   added("😀", single_word=True, normalized=False), added("ab", single_word=True), added("b")]},
        ["[INST]👨", "—[INST]", "\u00a0's", "x's", "😀😂", "é😀", "中😀", "xab", "ab", "x ab", "ab\u200d"]),
    "metaspace_first_offsets": (
        "Metaspace prepend_scheme 'first' prepends to every piece whose first char comes from input offset 0: "
        "not after Strip removed ' ', not after WhitespaceSplit removed it, but to each piece of a "
        "decomposed first char",
        {"kind": "char", "vocab_size": 300, "normalizer": [["Strip", True, True], ["NFKD"]], "norm_seq": True,
         "pre": [["Digits", True], ["Metaspace", "first", True]], "pre_seq": True,
         "model": {"byte_fallback": True, "bytes": "all"}, "decoder": None},
        [" a", "a", "  a b", "½x", "½ ½", "1a b", "\u0301a", "x ½"]),
    "metaspace_first_split": (
        "WhitespaceSplit then Metaspace 'first': ' a b' -> ['a', 'b'] (no piece starts at offset 0); "
        "StripAccents removing a leading mark moves the start too",
        {"kind": "char", "vocab_size": 300, "normalizer": [["StripAccents"]],
         "pre": [["WhitespaceSplit"], ["Metaspace", "first", False]], "pre_seq": True,
         "model": {"byte_fallback": True, "bytes": "all", "unk": True}, "decoder": None},
        [" a b", "a b", "\u0301a b", "\u0301 a", "x\u3000y"]),
    "post_processors": (
        "RobertaProcessing / BertProcessing: cls $A sep; Sequence of processors wraps in order",
        {"kind": "byte", "vocab_size": 320, "pre": [BL], "decoder": [["ByteLevel"]],
         "added": [added("<s>", special=True), added("</s>", special=True)], "post": ["Roberta"]},
        ["hello", "", "<s>x</s>"]),
    "bert_processing": (
        "BertProcessing in a post_processor Sequence after ByteLevel (HF panics on a Sequence of two "
        "templates, so nesting is not pinned)",
        {"kind": "byte", "vocab_size": 320, "pre": [BL], "decoder": [["ByteLevel"]],
         "added": [added("<s>", special=True), added("</s>", special=True)], "post": ["Seq", [["ByteLevel"], ["Bert"]]]},
        ["hello", ""]),
    "bert_pretokenizer": (
        "BertPreTokenizer = whitespace removed, then every punctuation char isolated",
        {"kind": "char", "vocab_size": 300, "pre": [["BertPreTokenizer"]], "model": {"unk": True},
         "decoder": None},
        ["Hello, world!", "a.b  c\u3000d", "«x»—y", "tab\there"]),
}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "tokenizers", "variants")
    os.makedirs(out_dir, exist_ok=True)
    total = 0
    for name, (what, spec, texts) in FIXTURES.items():
        spec = dict({"corpus_seed": 5, "corpus_lines": 150}, **spec)
        tok = variant_spec.build(spec)
        cases = []
        for t in texts:
            ids = tok.encode(t).ids
            cases.append({"text": t, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        doc = {"what": what, "tokenizer": json.loads(tok.to_str()), "cases": cases}
        path = os.path.join(out_dir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        total += os.path.getsize(path)
        print("%-30s %6d bytes" % (name, os.path.getsize(path)))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
