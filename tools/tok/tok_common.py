"""Shared pieces for the tokenizer fixture and live-check scripts: a deterministic multilingual
corpus, a random-string generator, and builders for HF tokenizers that mimic the pipelines of
Llama-3, Qwen2, SmolLM2, GPT-2 (prefix space, legacy merges) and Mistral tekken."""
import random

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers, Regex

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
TEKKEN_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
             r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<s>", "</s>", "[INST]", "[/INST]"]

WORDS = ("the quick brown fox jumps over lazy dog streaming tokenizer layer buffer gradient adapter "
         "model training data hello world naïve café résumé Zürich São Paulo déjà vu I'm you're he's "
         "we've they'll she'd don't WON'T It'S THEY'RE function return value int float printf while").split()
SNIPPETS = [
    "def f(x):\n    return x**2 + 3*x - 1\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\r\n",
    "if (x != null && y >= 10) { console.log(`${x}`); }",
    "SELECT id, name FROM users WHERE age > 21 ORDER BY name;",
    "https://example.com/path/to/file.html?q=1&r=two#frag",
    "price: $1,234.56 (approx. 1234567890 units) 3.14159 2024-06-01 12:30:45",
    "emoji: 😀 😂 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨",
    "中文文本测试，这是一个句子。日本語のテキスト、カタカナ。한국어 문장입니다.",
    "العربية نص تجريبي ١٢٣٤ مرحبا بالعالم",
    "עברית טקסט לבדיקה שלום עולם",
    "Ελληνικά κείμενο Ωμέγα; Русский текст, Привет мир! Ǆemal ǅ ǈ ʰʲ",
    "combining: e\u0301 a\u0300 o\u0308 n\u0303 \u1e9b\u0323 A\u030a \u0065\u0327\u0306 ḱ\u0301",
    "हिन्दी पाठ परीक्षण। தமிழ் உரை ไทย ภาษา",
    "spaces:   three   and\ttabs\t\tand\n\nnewlines\n\n\n  indented\n    more\r\n\r\nend  ",
    "numbers 0 12 345 6789 01234 ² ³ ½ Ⅻ ٣ ໒ and 1st 2nd 3rd",
    "quotes 'single' \"double\" ’curly’ «guillemets» — dash – en ... …",
    "Contractions: I'M, YOU'RE, it's, It'S, we'LL, 'S 'd 'Ve ’s",
    "nbsp:\u00a0x\u3000y\u2009z\u200bw\ufeffv",
    "Hello<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ?<|eot_id|>",
    "<s>[INST] Question [/INST] Answer</s>",
]
POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t\n\r",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "'sStTmMdD", "éèêëàâäöüßçñøåæœÉÀ", "中文字日本語한국어",
    "العربيةعبرית", "😀😂👍🏽‍❤️✨🇫🇷", "\u0300\u0301\u0302\u0308\u0327\u0323", "\u00a0\u3000\u2009\u2028\u0085",
    "²³½٣໒Ⅻ", "ǅǈʰʲ", "हिन्दीதமிழ்", "/\\", "ſKÅ",
]


def corpus(seed=1234, n_random=3000):
    rng = random.Random(seed)
    lines = list(SNIPPETS)
    for _ in range(n_random):
        k = rng.randint(3, 14)
        parts = []
        for _ in range(k):
            r = rng.random()
            if r < 0.6:
                parts.append(rng.choice(WORDS))
            elif r < 0.75:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 8))))
            else:
                parts.append(rng.choice(SNIPPETS)[rng.randint(0, 10):rng.randint(11, 40)])
        lines.append(rng.choice([" ", "  ", "\n", ", ", " "]).join(parts))
    return lines


def random_string(rng, with_specials=True):
    out = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.35:
            pool = rng.choice(POOLS)
            out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        elif r < 0.7:
            out.append(rng.choice([" ", "", "  ", "\n"]) + rng.choice(WORDS))
        elif r < 0.9:
            s = rng.choice(SNIPPETS)
            a = rng.randint(0, len(s))
            out.append(s[a:a + rng.randint(1, 30)])
        elif with_specials:
            out.append(rng.choice(SPECIALS + ["<|ls|>", "<|rs|>", "naïve cat", "nai\u0308ve cat"]))
    return "".join(out)


def _train(tok, vocab_size, extra_specials):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens(extra_specials)
    tok.add_tokens([AddedToken("naïve cat", normalized=True, special=False)])
    tok.decoder = decoders.ByteLevel()
    return tok


def _flags_tokens():
    return [AddedToken("<|ls|>", lstrip=True, special=True, normalized=False),
            AddedToken("<|rs|>", rstrip=True, special=True, normalized=False)]


def build(name, vocab_size=3000):
    """Returns (tokenizer, notes)."""
    if name in ("llama3", "qwen2", "tekken"):
        pattern = {"llama3": LLAMA3_RE, "qwen2": QWEN2_RE, "tekken": TEKKEN_RE}[name]
        tok = Tokenizer(models.BPE(ignore_merges=(name == "llama3")))
        if name == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=(name != "qwen2"), use_regex=False)])
    elif name == "smollm2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    elif name == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    else:
        raise ValueError(name)
    _train(tok, vocab_size, _flags_tokens())
    if name == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def test_texts(seed=99, n=300):
    rng = random.Random(seed)
    texts = list(SNIPPETS) + ["", " ", "  ", "\n", "a", " a", "a ", "  a", "x  \n  y", "'s", "'S's", "1234567",
                              "naïve cat and nai\u0308ve cat", "<|ls|> a  <|ls|>b", "x <|rs|>  y",
                              "\ufffd", "ſ's 'ſ K", "a/b//c\n/", "ABCdef GHi jKL", "ǅungla ǈ"]
    texts += [random_string(rng) for _ in range(n)]
    return texts
