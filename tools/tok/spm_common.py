"""SentencePiece-style fixtures: a tiny sentencepiece BPE model trained deterministically on
tok_common's corpus, the tokenizer.json files built from it that mimic Llama-2 / Mistral v0.1
(Prepend + Replace normalizer, no pre-tokenizer), Mistral v0.3 (Metaspace, prepend_scheme first,
split false) and two variants (Metaspace always + split, NFC, Metaspace decoder; a partial byte
table with unk, prepend never, no decoder), a GGUF file holding the model as llama.cpp stores it
(tokenizer.ggml.model = "llama"), and sentencepiece's own ids as the GGUF oracle."""
import io
import json
import os

import tok_common

SPACE = "\u2581"
CONTROLS = ["[INST]", "[/INST]"]
SPM_NAMES = ["llama2", "mistral3", "spm_split", "spm_unk"]
# SentencePiece piece types, numbered as GGUF's tokenizer.ggml.token_type.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def train_model(vocab_size=1200):
    """Serialized sentencepiece BPE model (deterministic: one thread, no sampling or shuffling)."""
    import sentencepiece as spm
    out = io.BytesIO()
    lines = [line for text in tok_common.corpus() for line in text.split("\n") if line.strip()]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, model_type="bpe", vocab_size=vocab_size,
        character_coverage=0.98, byte_fallback=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, control_symbols=CONTROLS, unk_id=0, bos_id=1, eos_id=2,
        pad_id=-1, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        max_sentence_length=100000, minloglevel=2)
    return out.getvalue()


def processor(model_bytes):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_proto=model_bytes)


def pieces(sp):
    """[(piece, score, type)] in id order."""
    out = []
    for i in range(sp.get_piece_size()):
        t = (UNKNOWN if sp.is_unknown(i) else CONTROL if sp.is_control(i) else BYTE if sp.is_byte(i)
             else UNUSED if sp.is_unused(i) else NORMAL)
        out.append((sp.id_to_piece(i), sp.get_score(i), t))
    return out


def derive_merges(vocab, normal):
    """BPE merges from a scored vocab: every split (l, r) of a normal piece p = l + r with l, r
    normal pieces, ordered by p's position in the vocab (sentencepiece orders pieces by score),
    then by the ids of l and r."""
    merges = []
    for p in sorted(normal, key=lambda s: vocab[s]):
        local = [(p[:k], p[k:]) for k in range(1, len(p)) if p[:k] in normal and p[k:] in normal]
        merges += sorted(local, key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
    return [list(m) for m in merges]


def _added(content, tid, special=True, normalized=False, lstrip=False, rstrip=False):
    return {"id": tid, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def _template(bos, eos=None):
    single = [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]
    special = {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}
    if eos is not None:
        single.append({"SpecialToken": {"id": "</s>", "type_id": 0}})
        special["</s>"] = {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}
    pair = single + [{"Sequence": {"id": "B", "type_id": 1}}]
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special}


LLAMA_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def tokenizer_json(name, model_bytes):
    """The tokenizer.json dict of fixture `name` (one of SPM_NAMES)."""
    ps = pieces(processor(model_bytes))
    vocab = {p: i for i, (p, _, _) in enumerate(ps)}
    normal = {p for p, _, t in ps if t == NORMAL}
    added = [_added("<unk>", 0), _added("<s>", 1), _added("</s>", 2)]
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False}
    j = {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
         "post_processor": _template(1), "decoder": LLAMA_DECODER}
    n = len(ps)
    if name == "llama2":  # Llama-2 / Mistral v0.1 (legacy): [INST] matched after normalization
        j["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE}, {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}
        added += [_added(c, vocab[c], special=False, normalized=True) for c in CONTROLS]
        added.append(_added("naïve cat", n, special=False, normalized=True))
    elif name == "mistral3":  # Mistral v0.3: Metaspace first, no split; control tokens raw
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
        added += [_added(c, vocab[c]) for c in CONTROLS]
        added += [_added("<|ls|>", n, lstrip=True), _added("<|rs|>", n + 1, rstrip=True)]
    elif name == "spm_split":
        j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}]}
        j["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"}, {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}]}
        j["post_processor"] = _template(1, 2)
        added += [_added(c, vocab[c]) for c in CONTROLS]
    elif name == "spm_unk":
        # Smaller vocab, no byte tokens at or above 0x80 nor for 'q'/'z', unk fused, prepend never,
        # no decoder (tokens joined with spaces), ignore_merges.
        keep = [(p, s, t) for i, (p, s, t) in enumerate(ps)
                if not (t == BYTE and (int(p[3:5], 16) >= 0x80 or p in ("<0x71>", "<0x7A>")))
                and not (t == NORMAL and ("q" in p or "z" in p or (i >= 500 and len(p) > 1)))]
        vocab = {p: i for i, (p, _, _) in enumerate(keep)}
        normal = {p for p, _, t in keep if t == NORMAL}
        model.update(ignore_merges=True)
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "never", "split": True}
        j["decoder"] = None
        added += [_added(c, vocab[c]) for c in CONTROLS]
    else:
        raise ValueError(name)
    model["vocab"] = vocab
    model["merges"] = derive_merges(vocab, normal)
    j["model"] = model
    j["added_tokens"] = added
    return j


def write_gguf(path, model_bytes):
    """The model as llama.cpp's converter stores a SentencePiece vocabulary (no tensors)."""
    import gguf
    ps = pieces(processor(model_bytes))
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([p for p, _, _ in ps])
    w.add_token_scores([s for _, s, _ in ps])
    w.add_token_types([t for _, _, t in ps])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


_SPECIALS = {}


def sp_encode(sp, text):
    """sentencepiece's ids for `text`, with control/unknown pieces written in the text taken as
    those tokens and every stretch between them encoded on its own (so each gets the dummy
    prefix), as llama.cpp and HF's Llama tokenizer do."""
    if id(sp) not in _SPECIALS:
        _SPECIALS[id(sp)] = sorted(((p, i) for i, (p, _, t) in enumerate(pieces(sp)) if t in (UNKNOWN, CONTROL)),
                                   key=lambda x: -len(x[0]))
    specials = _SPECIALS[id(sp)]
    ids, start, i = [], 0, 0
    while i < len(text):
        hit = next(((p, tid) for p, tid in specials if text.startswith(p, i)), None)
        if hit is None:
            i += 1
            continue
        if i > start:
            ids += sp.encode(text[start:i])
        ids.append(hit[1])
        start = i = i + len(hit[0])
    if start < len(text):
        ids += sp.encode(text[start:])
    return ids
