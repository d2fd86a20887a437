#!/usr/bin/env python3
"""Writes tests/fixtures/prompt_strategies/axolotl_prompts.json: the prompts axolotl's own prompters
build for its alpaca-family dataset types (data/prompt_format.h Note [axolotl prompt strategies]),
the oracle of tests/data/prompt_format_test.cc.

axolotl's package imports torch and more at the top; its prompters do not need them, so this loads
prompters.py and the three strategy modules from an unpacked wheel beside small stand-ins for the
two modules they import (colorama, axolotl.utils.logging, and the tokenizing strategies' base).

  pip download --no-deps axolotl==0.19.0 -d /tmp/ax && unzip -q /tmp/ax/axolotl-*.whl -d /tmp/ax/w
  python3 tools/ref/make_prompt_strategy_fixture.py /tmp/ax/w/axolotl OUT.json
"""
import json
import os
import shutil
import sys
import tempfile

src, out = sys.argv[1], sys.argv[2]
root = tempfile.mkdtemp()
pkg = os.path.join(root, "axolotl")
os.makedirs(os.path.join(pkg, "utils"))
os.makedirs(os.path.join(pkg, "prompt_strategies"))
os.makedirs(os.path.join(root, "colorama"))
for d in (pkg, os.path.join(pkg, "utils"), os.path.join(pkg, "prompt_strategies")):
    open(os.path.join(d, "__init__.py"), "w").close()
with open(os.path.join(root, "colorama", "__init__.py"), "w") as f:
    f.write("class Fore:\n    CYAN = ''\n    RESET = ''\n")
with open(os.path.join(pkg, "utils", "logging.py"), "w") as f:
    f.write("import logging\n\ndef get_logger(n):\n    return logging.getLogger(n)\n")
# The tokenizing strategies' base as prompt_tokenizers.py defines the parts used here (their
# parse_instruction_fields; the tokenizing itself is data/datasets.cc's prompt_completion).
with open(os.path.join(pkg, "prompt_tokenizers.py"), "w") as f:
    f.write(
        "class PromptTokenizingStrategy:\n"
        "    def __init__(self, prompter, *a):\n        self.prompter = prompter\n"
        "class InstructionPromptTokenizingStrategy(PromptTokenizingStrategy):\n    pass\n"
        "class AlpacaPromptTokenizingStrategy(InstructionPromptTokenizingStrategy):\n"
        "    def parse_instruction_fields(self, prompt):\n"
        "        return (prompt['instruction'], prompt['input'] if 'input' in prompt else '', prompt['output'])\n")
shutil.copy(os.path.join(src, "prompters.py"), pkg)
for m in ("alpaca_chat", "alpaca_w_system", "alpaca_instruct"):
    shutil.copy(os.path.join(src, "prompt_strategies", m + ".py"), os.path.join(pkg, "prompt_strategies"))
sys.path.insert(0, root)
from axolotl.prompt_strategies import alpaca_chat as ac, alpaca_instruct as ai, alpaca_w_system as aw  # noqa: E402


class Cfg:
    train_on_inputs = False
    sequence_len = 512


cases = [
    ("alpaca_chat", "", lambda: ac.load(None, Cfg())),
    ("alpaca_chat", "chatml", lambda: ac.load(None, Cfg(), {"conversation": "chatml"})),
    ("alpaca_chat", "instruct", lambda: ac.load(None, Cfg(), {"conversation": "instruct"})),
    ("alpaca_chat", "phi", lambda: ac.load(None, Cfg(), {"conversation": "phi"})),
    ("alpaca_chat.load_qa", "", lambda: ac.load_qa(None, Cfg())),
    ("alpaca_chat.load_concise", "", lambda: ac.load_concise(None, Cfg())),
    ("alpaca_chat.load_camel_ai", "", lambda: ac.load_camel_ai(None, Cfg())),
    ("alpaca_chat.load_no_prompt", "", lambda: ac.load_no_prompt(None, Cfg())),
    ("alpaca_instruct", "", lambda: ai.load(None, Cfg())),
    ("alpaca_instruct.load_no_prompt", "", lambda: ai.load_no_prompt(None, Cfg())),
    ("alpaca_w_system", "", lambda: aw.load(None, Cfg())),
    ("alpaca_w_system.load_chat", "", lambda: aw.load_chat(None, Cfg())),
    ("alpaca_w_system.load_instruct", "", lambda: aw.load_instruct(None, Cfg())),
    ("alpaca_w_system.load_open_orca", "", lambda: aw.load_open_orca(None, Cfg())),
    ("alpaca_w_system.load_open_orca_chatml", "", lambda: aw.load_open_orca_chatml(None, Cfg())),
]
records = [
    {"instruction": "Add", "input": "1 2", "output": "3", "system": "Be terse.", "question": "Q?", "answer": "A.",
     "message_1": "M1", "message_2": "M2", "response": "R.", "system_prompt": "SP"},
    {"instruction": "Add {x}", "output": "3", "system": "", "question": "Q?", "answer": "A.", "message_1": "M1",
     "message_2": "M2", "response": "R.", "system_prompt": "SP"},
    {"instruction": "Add", "input": None, "output": "3", "system": None, "question": "Q?", "answer": "A.",
     "message_1": "M1", "message_2": "M2", "response": "R.", "system_prompt": "SP"},
]
rows = []
for name, conv, make in cases:
    strategy = make()
    for r in records:
        fields = strategy.parse_instruction_fields(r)
        if len(fields) == 4:
            ins, inp, output, system = fields
            prompt = next(iter(strategy.prompter.build_prompt_w_system(system, ins, inp)))
        else:
            ins, inp, output = fields
            prompt = next(iter(strategy.prompter.build_prompt(ins, inp)))
        rows.append({"type": name, "conversation": conv, "record": r, "prompt": prompt, "output": output})
with open(out, "w") as f:
    json.dump({"source": "axolotl 0.19.0 prompters.py, prompt_strategies/alpaca_{chat,instruct,w_system}.py",
               "cases": rows}, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"{out}: {len(rows)} prompts")
shutil.rmtree(root)
