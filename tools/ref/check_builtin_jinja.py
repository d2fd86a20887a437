#!/usr/bin/env python3
"""Renders the Jinja text written for each named built-in chat template (data/chat_template_jinja.cc)
with Python's jinja2 set up as transformers' apply_chat_template sets it up, and compares with the
built-in renderer's text for the same conversations.

  mkdir -p /tmp/bj && ST_DUMP_BUILTIN_JINJA=/tmp/bj build/data_chat_template_jinja_test
  python3 tools/ref/check_builtin_jinja.py /tmp/bj
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
