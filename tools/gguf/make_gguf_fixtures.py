#!/usr/bin/env python3
"""Writes the GGUF test fixtures into tests/fixtures/gguf/ (committed; < 1 MB in total).

Oracles come from gguf-py (llama.cpp's python package), not from our C++ code:
  quants.gguf        one tensor per supported type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K,
                     then Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS); ref_<name>.f32 holds
                     gguf.quants.dequantize() of each, raw little-endian f32. Q8_0/Q4_0/Q4_1 are
                     quantised with gguf.quants.quantize; the others are random raw blocks (every
                     bit pattern of the quant payload is legal) whose f16 scale fields are
                     overwritten with finite values. Keys test.block.<TYPE> = [elems, bytes] copy
                     gguf-py's GGML_QUANT_SIZES, so the C++ type table is checked against it.
  tiny_llama.gguf    arch llama, 2 layers, H 64, NH 4, KVH 2, D 16, F 96, q/k/v biases, untied
                     lm_head, llama3 rope_freqs; q/k weights and biases permuted as
                     convert_hf_to_gguf.py does. ref_llama_<hf name>.f32 holds the HF-order values
                     (un-permuted dequantised data) for q_proj, k_proj (+biases), v_proj, embed.
  tiny_qwen3.gguf    arch qwen3, 1 layer, tied embeddings, q_norm/k_norm, not permuted, and a tiny
                     byte-level BPE vocabulary (tokenizer.ggml.*) exported from tiny_tokenizer.json.
  tiny_qwen3_yarn.gguf  the same with yarn rope scaling keys (factor 4, original context 512).
  tiny_tokenizer.json + tokenizer_cases.json  HF `tokenizers` BPE and the ids it gives for test strings.
Run: python3 tools/gguf/make_gguf_fixtures.py [out_dir]. Deterministic (fixed seeds).
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../tests/fixtures/gguf")


def f16_bits(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8)


def random_q4_k(rng, n_blocks):
    b = rng.integers(0, 256, size=(n_blocks, 144), dtype=np.uint8)
    b[:, 0:2] = f16_bits(rng.uniform(1e-3, 5e-2, size=(n_blocks, 1))).reshape(n_blocks, 2)  # d
    b[:, 2:4] = f16_bits(rng.uniform(1e-3, 5e-2, size=(n_blocks, 1))).reshape(n_blocks, 2)  # dmin
    return b


def random_q6_k(rng, n_blocks):
    b = rng.integers(0, 256, size=(n_blocks, 210), dtype=np.uint8)
    b[:, 208:210] = f16_bits(rng.uniform(1e-4, 1e-2, size=(n_blocks, 1))).reshape(n_blocks, 2)  # d (last)
    return b


# Offsets of the f16 scale fields in each block (ggml-common.h), and the magnitude range to draw
# them from. Everything else in a block is quant payload, scales packed in bytes included, and
# is left as random bytes.
RANDOM_BLOCK_HALVES = {
    T.Q5_0: [(0, 1e-3, 5e-2)],                    # d
    T.Q5_1: [(0, 1e-3, 5e-2), (2, 1e-2, 1.0)],    # d, m
    T.Q2_K: [(80, 1e-3, 5e-2), (82, 1e-3, 5e-2)],  # d, dmin (last)
    T.Q3_K: [(108, 1e-3, 5e-2)],                  # d (last)
    T.Q5_K: [(0, 1e-3, 5e-2), (2, 1e-3, 5e-2)],   # d, dmin
    T.IQ4_NL: [(0, 1e-4, 1e-2)],                  # d
    T.IQ4_XS: [(0, 1e-4, 1e-2)],                  # d
}


def random_blocks(rng, qtype, n_blocks):
    """Random raw blocks of qtype with finite, normal f16 scales of either sign."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off, lo, hi in RANDOM_BLOCK_HALVES[qtype]:
        v = rng.uniform(lo, hi, size=(n_blocks, 1)) * rng.choice([-1.0, 1.0], size=(n_blocks, 1))
        b[:, off:off + 2] = f16_bits(v).reshape(n_blocks, 2)
    return b


def random_rows(rng, qtype, rows, cols):
    """[rows, cols] elements of qtype as raw bytes shaped [rows, bytes per row] (what add_tensor wants)."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return random_blocks(rng, qtype, rows * cols // block_size).reshape(rows, cols // block_size * type_size)


def quantize(x, qtype):
    """HF-order float array -> raw bytes for the type, as gguf-py would store it."""
    if qtype == T.F32:
        return x.astype(np.float32)
    if qtype == T.F16:
        return x.astype(np.float16)
    return quants.quantize(x.astype(np.float32), qtype)


def dequant(raw, qtype):
    return quants.dequantize(raw, qtype).astype(np.float32)


def save_ref(name, arr):
    np.ascontiguousarray(arr, dtype="<f4").tofile(os.path.join(OUT, f"ref_{name}.f32"))


def write_quants(rng):
    w = gguf.GGUFWriter(os.path.join(OUT, "quants.gguf"), "none")
    f16_special = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 6e-8, -6e-5, np.inf, -np.inf, np.nan], dtype=np.float16)
    f16 = np.concatenate([f16_special, rng.standard_normal(64 * 3 - 10).astype(np.float16)]).reshape(3, 64)
    bf16_bits = rng.integers(0, 1 << 16, size=(3, 64), dtype=np.uint16)
    bf16_bits[0, :4] = [0x7FC0, 0xFF80, 0x0001, 0x8000]  # NaN, -inf, subnormal, -0
    tensors = {
        "f32": (rng.standard_normal((3, 64)).astype(np.float32), T.F32),
        "f16": (f16, T.F16),
        "bf16": (bf16_bits.view(np.uint8), T.BF16),
        "q8_0": (quantize(rng.standard_normal((3, 64)), T.Q8_0), T.Q8_0),
        "q4_0": (quantize(rng.standard_normal((3, 64)), T.Q4_0), T.Q4_0),
        "q4_1": (quantize(rng.standard_normal((3, 64)) + 0.5, T.Q4_1), T.Q4_1),
        "q4_k": (random_q4_k(rng, 4).reshape(2, 288), T.Q4_K),  # HF shape [2, 512]
        "q6_k": (random_q6_k(rng, 3).reshape(3, 210), T.Q6_K),  # HF shape [3, 256]
    }
    # Added later from their own generator, so the tensors above keep their bytes.
    rng_new = np.random.default_rng(4)
    for qtype, rows, cols in [(T.Q5_0, 3, 64), (T.Q5_1, 3, 64), (T.Q2_K, 2, 512), (T.Q3_K, 2, 512),
                              (T.Q5_K, 2, 512), (T.IQ4_NL, 3, 64), (T.IQ4_XS, 2, 512)]:
        tensors[qtype.name.lower()] = (random_rows(rng_new, qtype, rows, cols), qtype)
    for name, (raw, qtype) in tensors.items():
        w.add_tensor(name, raw, raw_dtype=qtype)
        save_ref(name, dequant(raw, qtype))
        w.add_array(f"test.block.{qtype.name}", list(gguf.GGML_QUANT_SIZES[qtype]))
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF rows -> GGUF (NORM rope) rows."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_freqs(theta, dim, factor=8.0, low=1.0, high=4.0, orig=8192):
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / theta ** (i / dim)
        wavelen = 2 * np.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            s = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def add_arch_keys(w, H, L, F, NH, KVH, D, V, theta):
    w.add_context_length(2048)
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(NH)
    w.add_head_count_kv(KVH)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(D)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_vocab_size(V)


def write_tiny_llama(rng):
    H, L, F, NH, KVH, D, V, theta = 64, 2, 96, 4, 2, 16, 40, 500000.0
    w = gguf.GGUFWriter(os.path.join(OUT, "tiny_llama.gguf"), "llama")
    add_arch_keys(w, H, L, F, NH, KVH, D, V, theta)
    w.add_file_type(7)
    w.add_quantization_version(2)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(V)])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def add(gname, hf_name, x, qtype, n_head=0):
        stored = permute(x, n_head) if n_head else x
        raw = quantize(stored, qtype)
        w.add_tensor(gname, raw, raw_dtype=qtype)
        deq = dequant(raw, qtype).reshape(x.shape)
        return unpermute(deq, n_head) if n_head else deq

    refs = {}
    refs["model.embed_tokens.weight"] = add("token_embd.weight", "", rng.standard_normal((V, H)), T.Q8_0)
    w.add_tensor("rope_freqs.weight", llama3_rope_freqs(theta, D))
    for l in range(L):
        p, hp = f"blk.{l}.", f"model.layers.{l}."
        a = p + "attn_"
        add(a + "norm.weight", "", 1 + 0.1 * rng.standard_normal(H), T.F32)
        q_t = T.Q4_1 if l == 0 else T.Q8_0
        refs[hp + "self_attn.q_proj.weight"] = add(a + "q.weight", "", rng.standard_normal((NH * D, H)), q_t, NH)
        refs[hp + "self_attn.k_proj.weight"] = add(a + "k.weight", "", rng.standard_normal((KVH * D, H)), T.Q4_0, KVH)
        refs[hp + "self_attn.v_proj.weight"] = add(a + "v.weight", "", rng.standard_normal((KVH * D, H)), T.Q8_0)
        refs[hp + "self_attn.q_proj.bias"] = add(a + "q.bias", "", rng.standard_normal(NH * D), T.F32, NH)
        refs[hp + "self_attn.k_proj.bias"] = add(a + "k.bias", "", rng.standard_normal(KVH * D), T.F32, KVH)
        add(a + "v.bias", "", rng.standard_normal(KVH * D), T.F32)
        add(a + "output.weight", "", rng.standard_normal((H, NH * D)), T.Q8_0)
        add(p + "ffn_norm.weight", "", 1 + 0.1 * rng.standard_normal(H), T.F32)
        add(p + "ffn_gate.weight", "", rng.standard_normal((F, H)), T.Q4_1)
        add(p + "ffn_up.weight", "", rng.standard_normal((F, H)), T.Q4_1)
        refs[hp + "mlp.down_proj.weight"] = add(p + "ffn_down.weight", "", rng.standard_normal((H, F)), T.Q8_0)
    add("output_norm.weight", "", np.ones(H), T.F32)
    add("output.weight", "", rng.standard_normal((V, H)), T.Q8_0)
    finish(w)
    for k, v in refs.items():
        save_ref("llama_" + k, v)


def make_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    corpus = ["the cat sat on the mat", "the dog ate the hat", "hello world, hello there",
              "numbers 12345 and 2024", "The theme of the thesis is the weather."] * 20
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    path = os.path.join(OUT, "tiny_tokenizer.json")
    tok.save(path)
    cases = ["the cat sat on the mat", "Hello world! 12345", "<|im_start|>user\nthe hat<|im_end|>\n",
             "  spaces   and\ttabs", "héllo wörld ✓", "thethethe 2024"]
    with open(os.path.join(OUT, "tokenizer_cases.json"), "w") as f:
        json.dump([{"text": c, "ids": tok.encode(c).ids} for c in cases], f, ensure_ascii=False, indent=1)
    return json.load(open(path))


def write_tiny_qwen3(rng, name="tiny_qwen3.gguf", yarn=False):
    tj = make_tokenizer()
    vocab = tj["model"]["vocab"]
    added = {a["id"]: a for a in tj["added_tokens"]}
    V = max(max(vocab.values()), max(added)) + 1
    tokens = [None] * V
    for t, i in vocab.items():
        tokens[i] = t
    types = [1] * V
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    H, L, F, NH, KVH, D = 64, 1, 64, 2, 1, 32
    w = gguf.GGUFWriter(os.path.join(OUT, name), "qwen3")
    add_arch_keys(w, H, L, F, NH, KVH, D, V, 1000000.0)
    if yarn:  # as convert_hf_to_gguf writes a yarn rope_scaling: type, factor, original context
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(512)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    refs = {}

    def add(gname, hf_name, x, qtype):
        raw = quantize(x, qtype)
        w.add_tensor(gname, raw, raw_dtype=qtype)
        if hf_name:
            refs[hf_name] = dequant(raw, qtype).reshape(x.shape)

    add("token_embd.weight", "model.embed_tokens.weight", rng.standard_normal((V, H)), T.Q8_0)
    p, hp = "blk.0.", "model.layers.0."
    add(p + "attn_norm.weight", "", np.ones(H), T.F32)
    add(p + "attn_q.weight", hp + "self_attn.q_proj.weight", rng.standard_normal((NH * D, H)), T.Q4_1)
    add(p + "attn_k.weight", hp + "self_attn.k_proj.weight", rng.standard_normal((KVH * D, H)), T.Q4_0)
    add(p + "attn_v.weight", "", rng.standard_normal((KVH * D, H)), T.Q8_0)
    add(p + "attn_q_norm.weight", "", np.ones(D), T.F32)
    add(p + "attn_k_norm.weight", "", np.ones(D), T.F32)
    add(p + "attn_output.weight", "", rng.standard_normal((H, NH * D)), T.Q8_0)
    add(p + "ffn_norm.weight", "", np.ones(H), T.F32)
    add(p + "ffn_gate.weight", "", rng.standard_normal((F, H)), T.Q8_0)
    add(p + "ffn_up.weight", "", rng.standard_normal((F, H)), T.Q8_0)
    add(p + "ffn_down.weight", "", rng.standard_normal((H, F)), T.Q8_0)
    add("output_norm.weight", "", np.ones(H), T.F32)
    finish(w)
    if not yarn:
        for k, v in refs.items():
            save_ref("qwen3_" + k, v)


def main():
    os.makedirs(OUT, exist_ok=True)
    # Self-check of the permutation pair against the documented row mapping (formats.md §2.7).
    x = np.arange(2 * 8 * 3).reshape(16, 3)
    g = permute(x, 2)
    assert (unpermute(g, 2) == x).all() and (g[0 * 8 + 2 * 1 + 1] == x[0 * 8 + 1 * 4 + 1]).all()
    write_quants(np.random.default_rng(1))
    write_tiny_llama(np.random.default_rng(2))
    write_tiny_qwen3(np.random.default_rng(3))
    write_tiny_qwen3(np.random.default_rng(3), "tiny_qwen3_yarn.gguf", yarn=True)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
