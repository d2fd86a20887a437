#!/usr/bin/env python3
"""Fixtures for a model directory that holds tokenizer.model and no tokenizer.json: the ids and
decodes transformers' AutoTokenizer gives (its LlamaTokenizer built from the sentencepiece model;
data/detail/tokenizer_spm_model.cc Note [tokenizer.model as transformers reads it]).

Models: tests/fixtures/tokenizers/spm_gguf/tiny_spm.model (control symbols [INST], [/INST]) and
spm_model/tiny_user.model, trained here (user-defined symbols, no byte fallback pieces for two
characters' worth of text: sentencepiece trains it deterministically). Each variant is a
tokenizer_config.json; output: tests/fixtures/tokenizers/spm_model/{variants.json,
<variant>.jsonl} with the lines of make_tokenizer_fixtures.py ("text", "ids", "ids_special",
"decoded", "decoded_skip").

Needs transformers 5.x, sentencepiece and protobuf (not installed by make test):
  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install transformers sentencepiece protobuf
  /tmp/hf/bin/python tools/tok/make_spm_model_fixture.py"""
import io
import json
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
OUT = os.path.join(FIX, "spm_model")

VARIANTS = {
    "default": ("spm_gguf/tiny_spm.model", {"tokenizer_class": "LlamaTokenizer"}),
    "legacy": ("spm_gguf/tiny_spm.model", {"tokenizer_class": "LlamaTokenizer", "legacy": True}),
    "no_prefix": ("spm_gguf/tiny_spm.model", {"tokenizer_class": "LlamaTokenizer", "add_prefix_space": False}),
    "eos_only": ("spm_gguf/tiny_spm.model", {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": False,
                                             "add_eos_token": True, "legacy": False}),
    # Llama-2's own tokenizer_config.json keys.
    "llama2_config": ("spm_gguf/tiny_spm.model", {"tokenizer_class": "LlamaTokenizer", "legacy": False,
                                                  "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                                                  "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
                                                  "clean_up_tokenization_spaces": False}),
    "user_defined": ("spm_model/tiny_user.model", {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>",
                                                   "eos_token": {"__type": "AddedToken", "content": "</s>",
                                                                 "lstrip": False, "normalized": False,
                                                                 "rstrip": False, "single_word": False}}),
}


def train_user_model():
    import sentencepiece as spm
    out = io.BytesIO()
    lines = [line for text in tok_common.corpus() for line in text.split("\n") if line.strip()]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, model_type="bpe", vocab_size=900,
        character_coverage=0.98, byte_fallback=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, split_digits=True,
        user_defined_symbols=["<tool>", "</tool>", "@@"], control_symbols=["<|im_end|>"],
        unk_id=0, bos_id=1, eos_id=2, pad_id=3, num_threads=1, input_sentence_size=0,
        shuffle_input_sentence=False, max_sentence_length=100000, minloglevel=2)
    return out.getvalue()


def texts():
    base = [json.loads(line)["text"] for line in open(os.path.join(FIX, "spm_gguf", "expected.jsonl"), encoding="utf-8")]
    edge = ["", " ", "  leading spaces", "trailing  ", "[INST] x [/INST]", "[INST]x[/INST]y", " [INST]  two",
            "<s>a</s> <s> b", "use <tool>call</tool> @@ here", "a<tool>b", "<|im_end|>\n<|im_end|> z",
            "\u2581already", "tab\there", "emoji \U0001F600 and \u00e9\u0301"]
    rng = random.Random(7)
    rand = [tok_common.random_string(rng) for _ in range(60)]
    return base + edge + rand


def main():
    from transformers import AutoTokenizer
    import transformers
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tiny_user.model"), "wb") as f:
        f.write(train_user_model())
    meta = {"transformers": transformers.__version__, "variants": {}}
    for name, (model, cfg) in VARIANTS.items():
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(FIX, model), os.path.join(d, "tokenizer.model"))
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump(cfg, f)
            tok = AutoTokenizer.from_pretrained(d)
            with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8") as f:
                for t in texts():
                    ids = tok(t, add_special_tokens=False)["input_ids"]
                    rec = {"text": t, "ids": ids, "ids_special": tok(t)["input_ids"],
                           "decoded": tok.decode(ids), "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        meta["variants"][name] = {"model": model, "config": cfg}
    with open(os.path.join(OUT, "variants.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
