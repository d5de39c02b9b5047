#!/usr/bin/env python3
"""Write a CTranslate2 Whisper model as the ggml file whisper.cpp loads, for Benchmarks/vs-peers.sh:
whisper.cpp then decodes with the very weights faster-whisper and Earshot use.

    whisper-ct2-to-ggml.py CT2_DIR OUT.bin

The file (whisper.cpp's legacy ggml layout): twelve int32 (magic "ggml", n_vocab, n_audio_ctx,
n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer,
n_mels, ftype 1 = float16); the mel filters (int32 rows, int32 columns, float32 values); the
regular tokens (int32 count, then int32 length and bytes each, in id order); then every tensor
(int32 dimensions, int32 name length, int32 type 0 = float32 / 1 = float16, the dimensions
innermost first, the name, the data) under openai-whisper's state-dict names. Matrices stay
float16 as CTranslate2 stores them; vectors, conv biases (as n x 1) and positional embeddings are
float32. CTranslate2 fuses query/key/value (self attention) and key/value (cross attention)
projections; they are split back, and the keys get no bias (Whisper's have none, CTranslate2
stores zeros).
"""
import importlib.util
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


convert = load("whisper_ct2_to_onnx", ROOT / "Scripts" / "models" / "whisper-ct2-to-onnx.py")
log_mel = load("whisper_log_mel", ROOT / "Tests" / "python" / "whisper_log_mel.py")


def tensors(V, dims):
    """(openai-whisper name, array) for every tensor whisper.cpp reads."""
    out = []

    def add(name, array):
        out.append((name, np.asarray(array)))

    def norm(name, prefix):
        add(name + ".weight", V[prefix + "/gamma"])
        add(name + ".bias", V[prefix + "/beta"])

    def linear(name, prefix, rows=None, bias=True):
        weight, b = V[prefix + "/weight"], V.get(prefix + "/bias")
        if rows is not None:
            weight = weight[rows]
            b = None if b is None else b[rows]
        add(name + ".weight", weight)
        if bias and b is not None:
            add(name + ".bias", b)

    def self_attention(name, prefix, D):
        linear(name + ".query", prefix + "/linear_0", slice(0, D))
        linear(name + ".key", prefix + "/linear_0", slice(D, 2 * D), bias=False)
        linear(name + ".value", prefix + "/linear_0", slice(2 * D, 3 * D))
        linear(name + ".out", prefix + "/linear_1")

    def mlp(name, prefix):
        norm(name + "_ln", prefix + "/layer_norm")
        linear(name + ".0", prefix + "/linear_0")
        linear(name + ".2", prefix + "/linear_1")

    Da, Dt = dims["n_audio_state"], dims["n_text_state"]
    for conv in ("conv1", "conv2"):
        add(f"encoder.{conv}.weight", V[f"encoder/{conv}/weight"])
        add(f"encoder.{conv}.bias", np.asarray(V[f"encoder/{conv}/bias"]).reshape(-1, 1))
    add("encoder.positional_embedding", V["encoder/position_encodings/encodings"])
    for i in range(dims["n_audio_layer"]):
        p, n = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        norm(n + ".attn_ln", p + "/self_attention/layer_norm")
        self_attention(n + ".attn", p + "/self_attention", Da)
        mlp(n + ".mlp", p + "/ffn")
    norm("encoder.ln_post", "encoder/layer_norm")

    add("decoder.token_embedding.weight", V["decoder/embeddings/weight"])
    add("decoder.positional_embedding", V["decoder/position_encodings/encodings"])
    for i in range(dims["n_text_layer"]):
        p, n = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        norm(n + ".attn_ln", p + "/self_attention/layer_norm")
        self_attention(n + ".attn", p + "/self_attention", Dt)
        norm(n + ".cross_attn_ln", p + "/attention/layer_norm")
        linear(n + ".cross_attn.query", p + "/attention/linear_0")
        linear(n + ".cross_attn.key", p + "/attention/linear_1", slice(0, Dt), bias=False)
        linear(n + ".cross_attn.value", p + "/attention/linear_1", slice(Dt, 2 * Dt))
        linear(n + ".cross_attn.out", p + "/attention/linear_2")
        mlp(n + ".mlp", p + "/ffn")
    norm("decoder.ln", "decoder/layer_norm")
    return out


def write(model_dir, path):
    V = convert.read_ct2(os.path.join(model_dir, "model.bin"))
    dims = convert.make_dims(V)
    vocab = convert.load_vocab(model_dir)
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    md = convert.make_metadata(dims, vocab, config, "ggml", [])
    decode_bytes = convert.byte_decoder()
    regular = [bytes(decode_bytes[c] for c in vocab[i]) for i in range(md["eot"])]
    filters = log_mel.filters(dims["n_mels"]).astype(np.float32)

    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<12i", 0x67676D6C, dims["n_vocab"], dims["n_audio_ctx"], dims["n_audio_state"], dims["n_audio_head"],
                            dims["n_audio_layer"], dims["n_text_ctx"], dims["n_text_state"], dims["n_text_head"],
                            dims["n_text_layer"], dims["n_mels"], 1))
        f.write(struct.pack("<2i", *filters.shape))
        f.write(filters.tobytes())
        f.write(struct.pack("<i", len(regular)))
        for token in regular:
            f.write(struct.pack("<i", len(token)) + token)
        for name, array in tensors(V, dims):
            half = array.ndim >= 2 and not name.endswith(("conv1.bias", "conv2.bias", "positional_embedding"))
            data = np.ascontiguousarray(array, dtype=np.float16 if half else np.float32)
            encoded = name.encode()
            f.write(struct.pack("<3i", data.ndim, len(encoded), 1 if half else 0))
            f.write(struct.pack(f"<{data.ndim}i", *reversed(data.shape)))
            f.write(encoded)
            f.write(data.tobytes())
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        write(argv[1], argv[2])
    except (OSError, ValueError, KeyError) as error:
        print(f"whisper-ct2-to-ggml: error: {error!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
