#!/usr/bin/env python3
"""Reference renderings of HF chat templates (tests/fixtures/chat/<name>_rendered.json).

Renders conversations with the template's own Jinja source in the environment transformers uses
for apply_chat_template (jinja2 sandbox, trim_blocks, lstrip_blocks, loopcontrols), so the C++
renderer is checked against the template itself, not against a reading of it.
    python3 tools/ref/chat_template_ref.py   (rewrites the qwen3 fixtures)
"""
import json
import os

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/chat")

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}],
    # Reasoning inside the content: stripped from history turns, kept (trimmed) after the last query.
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nA1"},
     {"role": "user", "content": "b"}, {"role": "assistant", "content": "<think>\n\nnew thoughts\n\n</think>\n\n\nB1"}],
    # Several assistant turns after the last user message: only the last (or one with reasoning)
    # gets a think block.
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "part one"},
     {"role": "assistant", "content": "<think>why</think>part two"}, {"role": "assistant", "content": "part three"}],
    # A system message that is not first is rendered as a turn; no user message at all.
    [{"role": "assistant", "content": "opening"}, {"role": "system", "content": "late system"},
     {"role": "assistant", "content": "<think>x</think>y</think>z"}],
]


def render(src, messages, add_generation_prompt):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    return env.from_string(src).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token="", eos_token="<|im_end|>")


def main():
    for name in ["qwen3", "qwen3_thinking_2507", "qwen2_5"]:
        src = open(os.path.join(HERE, name + ".jinja")).read()
        cases = []
        for conv in CONVERSATIONS:
            gen = conv if conv[-1]["role"] != "assistant" else conv[:-1]
            cases.append({"messages": conv, "text": render(src, conv, False),
                          "prompt_messages": gen, "prompt": render(src, gen, True)})
        with open(os.path.join(HERE, name + "_rendered.json"), "w") as f:
            json.dump({"template": name + ".jinja", "cases": cases}, f, indent=1, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
