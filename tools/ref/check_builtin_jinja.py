#!/usr/bin/env python3
"""Renders the Jinja text written for each named built-in chat template (data/chat_template_jinja.cc)
with Python's jinja2 set up as transformers' apply_chat_template sets it up, and compares with the
built-in renderer's text for the same conversations.

  mkdir -p /tmp/bj && ST_DUMP_BUILTIN_JINJA=/tmp/bj build/data_chat_template_jinja_test
  python3 tools/ref/check_builtin_jinja.py /tmp/bj

With --hf TOKENIZER_JSON [DIR=NAME ...] (needs transformers): each text is put in a tokenizer
directory as `train` saves it (tokenizer_config.json's chat_template and chat_template.jinja) and
rendered by AutoTokenizer's apply_chat_template; a second directory holds the text only in
chat_template.jinja beside a different tokenizer_config.json chat_template (transformers must take
the file's). Each DIR=NAME (an output_dir of `train`, a `merge` output) must load with its
chat_template.jinja as the template and render NAME's cases as the built-in NAME does.
"""
import glob
import json
import os
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols


def raise_exception(message):
    raise ValueError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main(d):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    bad = n = 0
    for path in sorted(glob.glob(os.path.join(d, "*.jinja"))):
        name = os.path.basename(path)[:-6]
        tmpl = env.from_string(open(path, encoding="utf-8").read())
        for line in open(os.path.join(d, name + ".cases.jsonl"), encoding="utf-8"):
            c = json.loads(line)
            kw = dict(messages=c["messages"], bos_token="<s>", eos_token="</s>",
                      add_generation_prompt=c["add_generation_prompt"])
            if c["tools"]:
                kw["tools"] = c["tools"]
            got = tmpl.render(**kw)
            n += 1
            if got != c["text"]:
                bad += 1
                print(f"{name}: MISMATCH\n  jinja2:   {got!r}\n  built-in: {c['text']!r}")
    print(f"{n} cases, {bad} mismatches")
    return 1 if bad or n == 0 else 0


def cases(d, name):
    return [json.loads(l) for l in open(os.path.join(d, name + ".cases.jsonl"), encoding="utf-8")]


def hf_render(tok, c):
    kw = dict(tokenize=False, add_generation_prompt=c["add_generation_prompt"])
    if c["tools"]:
        kw["tools"] = c["tools"]
    return tok.apply_chat_template(c["messages"], **kw)


def main_hf(d, tokenizer_json, extra):
    import shutil
    import tempfile
    from transformers import AutoTokenizer
    import transformers
    bad = n = 0
    work = tempfile.mkdtemp()
    for path in sorted(glob.glob(os.path.join(d, "*.jinja"))):
        name = os.path.basename(path)[:-6]
        text = open(path, encoding="utf-8").read()
        for layout in ("both", "file_wins"):
            t = os.path.join(work, name + "_" + layout)
            os.makedirs(t)
            shutil.copy(tokenizer_json, os.path.join(t, "tokenizer.json"))
            cfg = {"tokenizer_class": "PreTrainedTokenizerFast",
                   "chat_template": text if layout == "both" else "WRONG {{ messages }}"}
            json.dump(cfg, open(os.path.join(t, "tokenizer_config.json"), "w"))
            open(os.path.join(t, "chat_template.jinja"), "w", encoding="utf-8").write(text)
            tok = AutoTokenizer.from_pretrained(t)
            for c in cases(d, name):
                n += 1
                got = hf_render(tok, c)
                if got != c["text"]:
                    bad += 1
                    print(f"{name} ({layout}): MISMATCH\n  transformers: {got!r}\n  built-in:     {c['text']!r}")
    for spec in extra:
        t, name = spec.split("=")
        tok = AutoTokenizer.from_pretrained(t)
        n += 1
        if tok.chat_template != open(os.path.join(t, "chat_template.jinja"), encoding="utf-8").read():
            bad += 1
            print(f"{t}: its chat_template is not chat_template.jinja's")
        for c in cases(d, name):
            n += 1
            if hf_render(tok, c) != c["text"]:
                bad += 1
                print(f"{t} ({name}): MISMATCH {hf_render(tok, c)!r} vs {c['text']!r}")
    shutil.rmtree(work)
    print(f"transformers {transformers.__version__}: {n} checks, {bad} mismatches")
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[2] == "--hf":
        sys.exit(main_hf(sys.argv[1], sys.argv[3], sys.argv[4:]))
    sys.exit(main(sys.argv[1]))
