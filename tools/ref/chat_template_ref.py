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


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "required": ["city"],
                                                          "properties": {"city": {"type": "string"},
                                                                         "unit": {"enum": ["c", "f"]}}}}}
# Conversations with tools (rendered for the templates that have tool blocks).
TOOL_CASES = [
    {"tools": [WEATHER],
     "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                    "arguments": {"unit": "c", "city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21.5}"},
                  {"role": "assistant", "content": "21.5 C in Paris."}]},
    {"tools": [WEATHER, {"type": "function", "function": {"name": "now", "parameters": {}}}],
     "messages": [{"role": "user", "content": "Time and weather in Oslo, \u00e9t\u00e9?"},
                  {"role": "assistant", "content": "Let me check.",
                   "tool_calls": [{"function": {"name": "now", "arguments": "{}"}},
                                  {"name": "get_weather", "arguments": {"city": "Oslo", "scale": 1.5e-05, "n": [1, 2.0]}}]},
                  {"role": "tool", "content": "12:00"}, {"role": "tool", "content": "-3"},
                  {"role": "assistant", "content": "<think>both back</think>Noon, -3."}]},
    {"messages": [{"role": "user", "content": "Call now"},
                  {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "now", "arguments": {}}}]},
                  {"role": "tool", "content": "12:00"}, {"role": "assistant", "content": "It is noon."}]},
]


BOS = {"llama3_1": "<|begin_of_text|>", "llama3": "<|begin_of_text|>", "mistral_nemo": "<s>"}  # others: none
EOS = {"mistral_nemo": "</s>"}


def render(src, messages, add_generation_prompt, tools=None, bos="", eos="<|im_end|>"):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    return env.from_string(src).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token=bos, eos_token=eos, tools=tools)


def main():
    # llama3_1: strftime_now is not defined here, so the template takes its own fallback date
    # (26 Jul 2024), which is the date streamtune pins (README, chat_template).
    for name in ["qwen3", "qwen3_thinking_2507", "qwen2_5", "smollm2", "llama3_1", "llama3", "mistral_nemo"]:
        src = open(os.path.join(HERE, name + ".jinja")).read()
        cases = []
        for conv in CONVERSATIONS:
            gen = conv if conv[-1]["role"] != "assistant" else conv[:-1]
            bos, eos = BOS.get(name, ""), EOS.get(name, "<|im_end|>")
            try:
                case = {"messages": conv, "text": render(src, conv, False, bos=bos, eos=eos),
                        "prompt_messages": gen, "prompt": render(src, gen, True, bos=bos, eos=eos)}
            except Exception:  # the template refuses it (Mistral: roles must alternate)
                continue
            cases.append(case)
        for tc in TOOL_CASES if "<tool_call>" in src else []:
            cases.append({"record": tc, "text": render(src, tc["messages"], False, tc.get("tools"))})
        with open(os.path.join(HERE, name + "_rendered.json"), "w") as f:
            json.dump({"template": name + ".jinja", "cases": cases}, f, indent=1, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
