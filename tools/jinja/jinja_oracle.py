#!/usr/bin/env python3
"""Reference renderings for the C++ Jinja interpreter (tests/data/jinja_live_test.cc).

Renders templates with jinja2 configured exactly as transformers' apply_chat_template does
(ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols,
the generation tag]), its tojson filter, raise_exception and strftime_now) and prints one JSON
object a line: {"id", "template", "context", "ok", "out"} -- out is the rendering, or the error
when ok is false. Cases: every tests/fixtures/chat/*.jinja x conversations x add_generation_prompt,
hand-written expression / statement cases, and `fuzz` random expressions from a small grammar.
    python3 tools/jinja/jinja_oracle.py SEED FUZZ_COUNT
"""
import glob
import json
import os
import random
import sys
import warnings
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "../../tests/fixtures/chat")


class Generation(Extension):
    """transformers' AssistantTracker without the index bookkeeping: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def render(template, context):
    try:
        return True, ENV.from_string(template).render(**context)
    except Exception as e:  # noqa: BLE001 -- any failure: the C++ side must fail too
        return False, "%s: %s" % (type(e).__name__, e)


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "required": ["city"],
                                                          "properties": {"city": {"type": "string"},
                                                                         "unit": {"enum": ["c", "f"]}}}}}
NOW = {"type": "function", "function": {"name": "now", "parameters": {}}}

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}],
    [{"role": "user", "content": "h\u00e9llo w\u00f6rld \u4f60\u597d \U0001f642"},
     {"role": "assistant", "content": "\u00e7a va? \u00dcn\u00efc\u00f6d\u00e9 \u0416\u0443\u043a"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
    [{"role": "system", "content": "  padded system \n"}, {"role": "user", "content": "  {{ not a tag }} {% raw %}\n"},
     {"role": "assistant", "content": "\n answer with 'quotes' and \"double\" \\ backslash \n"}],
    [{"role": "user", "content": "only a question"}],
    [{"role": "assistant", "content": "starts with the assistant"}, {"role": "user", "content": "then a user"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nthoughts\n</think>\n\nA1"},
     {"role": "user", "content": "b"}, {"role": "assistant", "content": "B1"}],
]

TOOL_CASES = [
    {"tools": [WEATHER],
     "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                    "arguments": {"unit": "c", "city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21.5}"},
                  {"role": "assistant", "content": "21.5 C in Paris."}]},
    {"tools": [WEATHER, NOW],
     "messages": [{"role": "user", "content": "Time and weather in Oslo?"},
                  {"role": "assistant", "content": "Let me check.",
                   "tool_calls": [{"type": "function", "function": {"name": "now", "arguments": {}}},
                                  {"type": "function", "function": {"name": "get_weather",
                                                                    "arguments": {"city": "Oslo", "n": 1.5}}}]},
                  {"role": "tool", "content": "12:00"}, {"role": "tool", "content": "cold"},
                  {"role": "assistant", "content": "Noon, cold."}]},
]

TOKENS = {"llama3": ("<|begin_of_text|>", "<|eot_id|>"), "llama3_1": ("<|begin_of_text|>", "<|eot_id|>"),
          "qwen2_5": ("", "<|im_end|>"), "qwen3": ("", "<|im_end|>"), "qwen3_thinking_2507": ("", "<|im_end|>"),
          "smollm2": ("", "<|im_end|>"), "phi3": ("<s>", "<|endoftext|>"), "gemma": ("<bos>", "<eos>"),
          "deepseek_llm": ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"),
          "deepseek_v3_abridged": ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>")}

# Hand-written cases: (template, context).
V = {"x": 3, "y": 2.5, "s": "Ab c", "l": [1, 2, 3], "d": {"a": 1, "b": "x"}, "n": None, "t": True,
     "msgs": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "e": "", "z": 0}
CASES = [
    "{{ 1.0 }} {{ 3/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }} {{ 1e20 }} {{ 0.1+0.2 }}",
    "{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {} }}",
    "{{ 'it\\'s' }} {{ [\"it's\"] }} {{ ['a\\nb'] }} {{ '\\u00e9\\x41\\t|' }}",
    "{{ s[::-1] }}|{{ s[1:] }}|{{ s[:-1] }}|{{ l[::2] }}|{{ l[-1] }}|{{ l[5] }}|{{ s[-2:10] }}|{{ l[1:2] }}",
    "{{ x == 3.0 }} {{ t == 1 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 in l }} {{ 'b' in d }} {{ 'A' not in s }}",
    "{{ x if x > 2 else 'no' }}|{{ 'y' if z }}|{{ n is none }}|{{ undefined_var is defined }}|{{ d.missing is defined }}",
    "{{ s|upper }} {{ s|lower }} {{ s|title }} {{ s|capitalize }} {{ '  t  '|trim }} {{ 'xxaxx'|trim('x') }}",
    "{{ l|length }} {{ s|count }} {{ l|first }} {{ l|last }} {{ l|join('-') }} {{ l|sum }} {{ l|min }} {{ l|max }}",
    "{{ undefined_var|default('dflt') }} {{ e|default('dflt') }} {{ e|default('dflt', true) }} {{ n|d('x', boolean=true) }}",
    "{{ d|tojson }} {{ d|tojson(indent=2) }} {{ l|tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': [1.0, 'é', none]}|tojson(sort_keys=true) }}",
    "{{ d|items|list }} {{ d|dictsort }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('q', 7) }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|map(attribute='content')|join(',') }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='role')|first }}",
    "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true, reverse=true) }} {{ [1, 1, 2]|unique|list }} {{ l|reverse|list }} {{ s|reverse }}",
    "{{ 2.567|round(2) }} {{ 2.5|round }} {{ -3|abs }} {{ '42'|int + 1 }} {{ 'x'|int }} {{ '3.7'|float }} {{ 3|string ~ 'a' }} {{ [1, 2]|map('string')|join }}",
    "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}|{{ '<a href=\"x\">'|e }}|{{ 'one two  three'|wordcount }}|{{ 'ab'|center(7) }}",
    "{{ ' a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ s.startswith(('x', 'A')) }}|{{ s.endswith('c') }}",
    "{{ 'hello world'.title() }} {{ 'abc'.replace('b', 'X') }} {{ 'abcb'.find('b') }} {{ 'abcb'.rfind('b') }} {{ 'abcb'.count('b') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }}{% if not loop.last %}, {% endif %}{% endfor %}",
    "{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for i in l if i != 2 %}{{ i }}{{ loop.length }}{% else %}none{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}",
    "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% set a = 1 %}{% for i in l %}{% set a = a + i %}{{ a }}{% endfor %}{{ a }}",
    "{% set ns = namespace(total=0) %}{% for i in l %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
    "{% set block %}inner {{ x }}{% endset %}[{{ block }}]{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{% macro m(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='q') }}{{ m() }}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% filter upper %}shout {{ s }}{% endfilter %}",
    "  {% if t %}\n  yes\n  {% endif %}\n  {%- if t %} a {% endif -%}  \n{# comment #}\nend\n",
    "{%+ if t %}x{% endif +%}\n{{- ' y ' -}}\n z {%- raw %} {{ raw }} {% endraw %}",
    "{{ x + y }} {{ x * 'ab' }} {{ l + [4] }} {{ 'a' ~ 1 ~ none }} {{ '%s is %d' % ('x', 3) }} {{ -x }} {{ not t }} {{ t and 'yes' }} {{ n or 'dflt' }}",
    "{{ x is odd }} {{ x is even }} {{ 9 is divisibleby 3 }} {{ s is string }} {{ x is number }} {{ y is float }} {{ x is integer }} {{ d is mapping }} {{ l is iterable }} {{ l is sequence }} {{ t is true }} {{ n is false }} {{ s is lower }} {{ 'AB' is upper }} {{ 3 is in l }} {{ x is gt 2 }} {{ x is ne 3 }}",
    "{{ raise_exception('custom failure') }}",
    "{{ undefined_var.attr }}",
    "{{ l.append(4) }}",
    "{{ 'a' + 1 }}",
    "{{ x | nosuchfilter }}",
    "{% for %}",
    "{{ unclosed",
    "{% if t %}no end",
    "{{ 1 / 0 }}",
    "{{ strftime_now('%Y') }}",
    "{% for i in range(200000) %}{% endfor %}",
    "{{ d['a'] }} {{ d.a }} {{ d['zz'] }} {{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ n.x }}",
    "{{ 'ÉCOLE çà'|lower }} {{ 'straße'|upper }} {{ 'привет мир'|title }}",
    "{% generation %}gen {{ x }}{% endgeneration %}",
]

# ---- fuzz: random expressions over V ---------------------------------------------------------

# (No map / select / unique / items / reverse: printed without |list, jinja2 writes a generator's
# address, which the C++ side refuses on purpose.)
FILTERS = ["length", "upper", "lower", "trim", "first", "last", "join", "tojson", "string", "list",
           "sort", "abs", "title", "capitalize", "int", "float", "default", "round"]
TESTS = ["defined", "none", "string", "number", "integer", "mapping", "iterable", "odd", "even", "true", "false"]


def gen_expr(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(["x", "y", "s", "l", "d", "n", "t", "e", "z", "msgs", "undef", "1", "0", "-2", "2.5",
                           "'str'", "'A b'", "[1, 2]", "[]", "{'k': 1}", "true", "none", "(1, 'a')"])
    if r < 0.5:
        op = rng.choice(["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "and", "or", "in", "not in"])
        return "(%s %s %s)" % (gen_expr(rng, depth + 1), op, gen_expr(rng, depth + 1))
    if r < 0.65:
        return "%s|%s" % (gen_expr(rng, depth + 1), rng.choice(FILTERS))
    if r < 0.72:
        return "(%s is %s%s)" % (gen_expr(rng, depth + 1), rng.choice(["", "not "]), rng.choice(TESTS))
    if r < 0.8:
        return "(%s if %s else %s)" % (gen_expr(rng, depth + 1), gen_expr(rng, depth + 1), gen_expr(rng, depth + 1))
    if r < 0.88:
        base = rng.choice(["s", "l", "d", "msgs", "e", "undef", "'A b'", "[1, 2]", "(1, 'a')", "msgs[0]"])
        return "%s[%s]" % (base, rng.choice(["0", "-1", "1:", "::-1", "'a'", "'role'", ":2"]))
    if r < 0.94:
        return "(not %s)" % gen_expr(rng, depth + 1)
    return "[%s, %s]" % (gen_expr(rng, depth + 1), gen_expr(rng, depth + 1))


def emit(case_id, template, context):
    ok, out = render(template, context)
    print(json.dumps({"id": case_id, "template": template, "context": context, "ok": ok, "out": out},
                     ensure_ascii=False))


def main():
    warnings.simplefilter("ignore")  # jinja2's generated code warns on e.g. `true[0]`; the output is JSON only
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    fuzz = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.jinja"))):
        name = os.path.basename(path)[:-6]
        with open(path, encoding="utf-8") as f:
            template = f.read()
        bos, eos = TOKENS.get(name, ("<s>", "</s>"))
        cases = [{"messages": m} for m in CONVERSATIONS] + TOOL_CASES
        for k, case in enumerate(cases):
            for gen in (False, True):
                context = dict(case, bos_token=bos, eos_token=eos, add_generation_prompt=gen)
                emit("%s/%d/%s" % (name, k, gen), template, context)
    for k, template in enumerate(CASES):
        emit("case/%d" % k, template, V)
    rng = random.Random(seed)
    for k in range(fuzz):
        emit("fuzz/%d/%d" % (seed, k), "{{ %s }}" % gen_expr(rng), V)


if __name__ == "__main__":
    main()
