#!/usr/bin/env python3
"""Convert a CTranslate2 Whisper model into the int8 ONNX graphs Earshot's decoder runs.

The layout began as sherpa-onnx's (the encoder's outputs and metadata keys are still its own);
since version 3 the decoder takes each layer's cross-attention K/V as inputs of their own and
batches audios, which sherpa-onnx cannot drive; since version 4 it computes the logits of the
positions asked for only; since version 5 it reads each layer's self-attention cache where the
caller keeps it and returns only the new positions' keys and values.

Input: a CTranslate2 model directory (model.bin in binary format v5/v6, vocabulary.txt,
config.json), as shipped by faster-whisper style packages.  Output, in OUT_DIR:

  PREFIX-encoder.int8.onnx
      input   mel                      (N, n_mels, T)              float32
      outputs n_layer_cross_k          (n_text_layer, N, n_text_state, T/2)
                                       each layer's K transposed: head h's rows at h*d_head
              n_layer_cross_v          (n_text_layer, N, n_text_head * T/2, d_head)
                                       each layer's V by head: head h's T/2 rows at h*T/2
      metadata: the keys sherpa-onnx's OfflineWhisperModel reads (n_mels, n_text_*, sot, eot,
      sot_sequence, all_language_tokens/codes, no_timestamps, ...) plus the token-timestamp keys
      n_alignment_heads and alignment_heads ("layer:head,...") and version "5".

  PREFIX-decoder.int8.onnx
      inputs  tokens (N, n) int64,
              self_k_0 .. self_k_{L-1}, self_v_0 .. self_v_{L-1}
                                           (1 + offset, N, n_text_state): layer i's keys and
                                           values of the `offset` positions before, time-major,
                                           after a first row of zeros no query attends to
              cross_k_0 .. cross_k_{L-1}   (A, n_text_state, T/2): layer i of n_layer_cross_k
              cross_v_0 .. cross_v_{L-1}   (A, n_text_head * T/2, d_head): layer i of n_layer_cross_v
              cross_frames (A,) int64: each audio's encoder frames (T/2 for one audio alone),
              logit_positions (P,) int64: the token positions (0 ..< n) whose logits are wanted
      The cross K/V may hold A audios for N = A * R token rows: audio a's R rows are a*R .. a*R + R - 1
      (a beam, samples, or one session of a batch); each audio's frames past cross_frames[a] (the
      padding of a shorter audio batched with longer ones) get no attention.  Layer i of the
      encoder's output is contiguous, so a caller passes it without a copy.
      outputs logits                   (N, P, n_vocab): position logit_positions[p] of each row
              new_k, new_v             (n_text_layer, n, N, n_text_state): the new tokens'
                                       keys and values, to append to each layer's cache
              cross_attention_weights  (N, n_alignment_heads, n, T/2)  float32

  PREFIX-tokens.txt   "<base64 of the token's bytes> <id>" for every regular token id < eot.

Token timestamps: the 4th output holds, for each alignment head of the CT2 config.json key
`alignment_heads` (sorted by layer, then head), the cross-attention *probabilities* (softmax
over the audio-frame axis, taken over the audio's cross_frames) of every input token. Earshot's
decoder clips them to the audio's length and runs OpenAI's dynamic time warping over them.

The graphs are written with the onnx helper API directly from the numpy weights (opset 17,
IR 8); neither torch nor openai-whisper is needed.  The math is openai-whisper's model.py with
sherpa-onnx's export changes (encoder positional embedding sliced to the input length, so any
T <= 3000 works).  int8 files are made by onnxruntime's quantize_dynamic (MatMul weights, QInt8,
per-channel scales) and, on top of that:
  * the tied token embedding / output projection is stored once, 8-bit with a per-row scale, as
    uint8 with zero point 128; the lookup dequantizes the rows it needs, the logits multiply the
    dynamically quantized decoder state with it (DynamicQuantizeLinear + MatMulInteger, u8 x u8:
    exact on every CPU -- u8 x s8 on AVX2 without VNNI sums pairs in saturating int16 and
    corrupted ~30 % of base's logits, 3 errors in 71 LibriVox words instead of fp32's 1);
  * the decoder's dynamically quantized products quantize each row on its own: the row is divided
    by its largest magnitude and a constant row (-1, 1, 0, ...) is appended, so the tensor-wide
    range DynamicQuantizeLinear takes is always [-1, 1].  Rows of other sequences -- other beams,
    other sessions' audio in a batch -- then change nothing of a row's result (with one scale
    per tensor, one session's loud activations coarsened another's: argmax flips in a test);
  * decoder MatMul weights use 7 of their 8 bits (reduce_range: no int16 saturation either), and
    in each decoder layer the 8 fc2 input units with the largest ||fc1 row * ln gamma|| are
    multiplied in float (base's layer-2 unit 560 reaches ~180 where 99 % stay below 0.2 and
    would otherwise set the dynamic uint8 scale of the whole fc2 input);
  * conv kernels and positional embeddings are stored as float16 (the CT2 source is float16, so
    this is lossless) and cast to float32 in the graph;
  * the encoder writes the cross-attention K/V already split by head (K transposed), so each
    decoder step multiplies every head's query with its own K and V (no per-step transposes of
    the 1500-frame K/V, and none of the head-count-times larger products a block-diagonal query
    matrix over the stored (N, T, D) layout computed); each layer's K/V is gathered just before it
    is used (a runtime index keeps ONNX Runtime from fusing them into one up-front Split);
  * the self-attention caches hold only the positions decoded so far (not a fixed n_text_ctx
    cache copied whole by ScatterND on every step); since version 5 the caller keeps them,
    time-major, and appends each step's new positions (the graph copied the whole cache about
    nine times a step while it joined and returned it: version 5 takes 0.82-0.86x a tiny.en beam-5
    step at 50-100 positions, 0.70x at 200; base 0.89x, 0.71x, 0.52x).
  The last two measured: the same tokens, timestamps and durations as before on LibriVox; a
  decoder step 10-20 % faster, the five LibriVox decodes ~15 % (tiny.en) and ~20 % (base) (AVX2).
  The per-head layout: a decoder step 13-14 % faster at 1710 mel frames and 22-29 % at 3000
  (tiny.en), 15 % and 23 % (base); the same tiny.en tokens and times, base within rounding
  (one comma and one final "." of the five utterances differ; no word does).

The output is deterministic: the same input and the same numpy/onnx/onnxruntime versions give
byte-identical files (intermediate files live in a private temporary directory whose name
never reaches the output).

Usage:
  whisper-ct2-to-onnx.py --model-dir CT2_DIR --out-dir OUT --name base [--prefix base]
                                [--fp32-dir DIR]
"""

import argparse
import base64
import json
import logging
import os
import re
import shutil
import struct
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "earshot-whisper-ct2-to-onnx"
FC2_OUTLIERS = 8  # decoder fc2 hidden units per layer multiplied in float (see Graph.mlp_block)


# ---------------------------------------------------------------------------------------------
# CTranslate2 model.bin reader (binary format, see ctranslate2/specs/model_spec.py)
# ---------------------------------------------------------------------------------------------
CT2_DTYPES = ["float32", "int8", "int16", "int32", "float16", "bfloat16"]


def read_ct2(path):
    """Return {variable name: numpy array} of a CTranslate2 WhisperSpec model.bin.

    Arrays are zero-copy views into the file contents; aliases map to their target array.
    """
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<H")  # length including the trailing NUL
        s = buf[pos : pos + n - 1].decode("utf-8")
        pos += n
        return s

    version = take("<I")
    if version < 5:
        raise ValueError(f"{path}: unsupported CTranslate2 binary version {version}")
    spec = string()
    if spec != "WhisperSpec":
        raise ValueError(f"{path}: not a Whisper model (spec {spec!r})")
    take("<I")  # spec revision
    variables = {}
    for _ in range(take("<I")):
        name = string()
        dims = [take("<I") for _ in range(take("<B"))]
        dtype = CT2_DTYPES[take("<B")]
        nbytes = take("<I")
        if dtype == "bfloat16":
            raw = np.frombuffer(buf, dtype=np.uint16, count=nbytes // 2, offset=pos)
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize, offset=pos)
        variables[name] = arr.reshape(dims)
        pos += nbytes
    for _ in range(take("<I")):
        alias = string()
        variables[alias] = variables[string()]
    return variables


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Graph builder
# ---------------------------------------------------------------------------------------------
class Graph:
    """Collects nodes and initializers; every generated name is numbered, so it is deterministic."""

    def __init__(self, name, half_storage, rowwise=False):
        self.name = name
        self.half_storage = half_storage
        self.rowwise = rowwise
        self.nodes, self.inits = [], []
        self.counter = 0
        self.consts = {}

    def fresh(self, base):
        self.counter += 1
        return f"{base}_{self.counter}"

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))  # (keeps 0-d scalars 0-d)
        return name

    def init_float(self, name, arr):
        """A float tensor that is not a MatMul weight (conv kernels, positional embeddings).

        With half_storage, large ones are stored as float16 and cast to float32 in the graph
        (onnxruntime folds the Cast when the session is created)."""
        arr = f32(arr)
        if self.half_storage and arr.size >= 4096:
            return self.op("Cast", [self.init(name + ".fp16", arr.astype(np.float16))], to=TensorProto.FLOAT)
        return self.init(name, arr)

    def i64(self, vals):
        key = ("i64", tuple(vals) if isinstance(vals, (list, tuple)) else vals)
        if key not in self.consts:
            self.consts[key] = self.init(self.fresh("c_i64"), np.array(vals, dtype=np.int64))
        return self.consts[key]

    def f(self, val):
        key = ("f32", val)
        if key not in self.consts:
            self.consts[key] = self.init(self.fresh("c_f32"), np.array(val, dtype=np.float32))
        return self.consts[key]

    def op(self, op_type, inputs, n_out=1, out=None, **attrs):
        """Append a node; returns its output name (or names when n_out > 1).
        `out` names the (single) output, e.g. a graph output."""
        outs = [out] if out else [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    # -- building blocks ----------------------------------------------------------------------
    def layer_norm(self, x, gamma, beta, name):
        g = self.init(name + ".weight", f32(gamma))
        b = self.init(name + ".bias", f32(beta))
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)

    def linear(self, x, w, b, name):
        """x @ w.T + b with w in (out, in) layout, like torch and CTranslate2.

        In a rowwise graph (the decoder) the product goes through ``rowwise_input`` first, so its
        dynamic quantization is per row (the float `fc2_outlier` product needs none)."""
        if self.rowwise and not name.endswith("fc2_outlier"):
            flat, rows, unflatten = self.rowwise_input(x, f32(w).shape[1])
            y = self.op("MatMul", [flat, self.init(name + ".weight_t", f32(w).T)])
            y = self.op("Mul", [unflatten(y, f32(w).shape[0]), rows])
        else:
            y = self.op("MatMul", [x, self.init(name + ".weight_t", f32(w).T)])
        if b is not None:
            y = self.op("Add", [y, self.init(name + ".bias", f32(b))])
        return y

    def rowwise_input(self, x, d_in):
        """x (N, n, d_in) as the input of a dynamically quantized MatMul whose quantization depends
        on each row alone: every row divided by its largest magnitude, flattened, and one constant
        row (-1, 1, 0, ...) appended, so the whole tensor's range -- which sets
        DynamicQuantizeLinear's one scale and zero point -- is always exactly [-1, 1].  Rows of
        other sequences in a batch (other beams, other sessions' audio) then change nothing of a
        row's result.  Returns the input, the rows' magnitudes (N, n, 1), and a function taking
        the MatMul's (N*n + 1, d_out) product back to (N, n, d_out) without the constant row."""
        rows = self.op("Add", [self.op("ReduceMax", [self.op("Abs", [x])], axes=[-1], keepdims=1), self.f(1e-12)])
        flat = self.op("Reshape", [self.op("Div", [x, rows]), self.i64([-1, d_in])])
        pin = np.zeros((1, d_in), np.float32)
        pin[0, 0], pin[0, 1] = -1.0, 1.0
        flat = self.op("Concat", [flat, self.init(self.fresh("range_pin"), pin)], axis=0)
        lead = self.op("Slice", [self.op("Shape", [x]), self.i64([0]), self.i64([-1])])

        def unflatten(y, d_out):
            y = self.op("Slice", [y, self.i64([0]), self.i64([-1]), self.i64([0])])
            return self.op("Reshape", [y, self.op("Concat", [lead, self.i64([d_out])], axis=0)])
        return flat, rows, unflatten

    def gelu(self, x):
        """Exact (erf) GELU, as Whisper uses."""
        t = self.op("Erf", [self.op("Div", [x, self.f(float(np.sqrt(2.0)))])])
        t = self.op("Mul", [x, self.op("Add", [t, self.f(1.0)])])
        return self.op("Mul", [t, self.f(0.5)])


    def mlp_block(self, x, V, p, name, n_outlier=0):
        """x + fc2(gelu(fc1(layer_norm(x)))): the feed-forward half of a Whisper layer (weights under `p`ffn/).

        n_outlier > 0: the hidden units with the largest ||fc1 row * ln gamma|| (the ones that can
        fire far above the rest, e.g. base decoder layer 2 unit 560 reaches ~180 where 99% stay
        below 0.2) are taken out of fc2's dynamically quantized input and multiplied in float
        (the `fc2_outlier` MatMul, kept out of quantization), so they no longer set its uint8 scale."""
        h = self.layer_norm(x, V[p + "ffn/layer_norm/gamma"], V[p + "ffn/layer_norm/beta"], f"{name}.mlp_ln")
        h = self.gelu(self.linear(h, V[p + "ffn/linear_0/weight"], V[p + "ffn/linear_0/bias"], f"{name}.mlp.fc1"))
        if n_outlier:
            w1 = f32(V[p + "ffn/linear_0/weight"]) * f32(V[p + "ffn/layer_norm/gamma"])[None, :]
            idx = np.sort(np.argsort(-np.linalg.norm(w1, axis=1), kind="stable")[:n_outlier])
            w2 = f32(V[p + "ffn/linear_1/weight"]).copy()  # (out, hidden)
            mask = np.ones(w2.shape[1], np.float32)
            mask[idx] = 0
            w_out = w2[:, idx].copy()
            w2[:, idx] = 0
            rest = self.linear(self.op("Mul", [h, self.init(f"{name}.mlp.fc2.inlier_mask", mask)]),
                               w2, V[p + "ffn/linear_1/bias"], f"{name}.mlp.fc2")
            hot = self.op("Gather", [h, self.init(f"{name}.mlp.fc2.outlier_index", idx.astype(np.int64))], axis=-1)
            return self.op("Add", [x, self.op("Add", [rest, self.linear(hot, w_out, None, f"{name}.mlp.fc2_outlier")])])
        return self.op("Add", [x, self.linear(h, V[p + "ffn/linear_1/weight"], V[p + "ffn/linear_1/bias"], f"{name}.mlp.fc2")])
    def split_heads(self, x, n_head, d_head, perm):
        """(N, L, D) -> (N, L, H, dh) -> transpose(perm)."""
        return self.op("Transpose", [self.op("Reshape", [x, self.i64([0, -1, n_head, d_head])])], perm=perm)

    def attention(self, q, k, v, n_head, d_head, d_model, mask=None):
        """Multi-head attention of (N, L, D) tensors; q must already be scaled by 1/sqrt(dh)."""
        qh = self.split_heads(q, n_head, d_head, [0, 2, 1, 3])  # N H Lq dh
        kh = self.split_heads(k, n_head, d_head, [0, 2, 3, 1])  # N H dh Lk
        vh = self.split_heads(v, n_head, d_head, [0, 2, 1, 3])  # N H Lk dh
        s = self.op("MatMul", [qh, kh])
        if mask is not None:
            s = self.op("Add", [s, mask])
        o = self.op("MatMul", [self.op("Softmax", [s], axis=-1), vh])  # N H Lq dh
        o = self.op("Transpose", [o], perm=[0, 2, 1, 3])
        return self.op("Reshape", [o, self.i64([0, -1, d_model])])

    def model(self, inputs, outputs, doc, metadata=None):
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)], producer_name=PRODUCER)
        m.ir_version = IR_VERSION
        m.doc_string = doc
        for key, val in (metadata or {}).items():
            m.metadata_props.add(key=key, value=str(val))
        onnx.checker.check_model(m)
        return m


def fused_qkv(V, prefix, d_model, scale):
    """CT2's fused [q; k; v] projection with 1/sqrt(dh) folded into the query rows
    (exact for dh = 64: a power of two)."""
    w = f32(V[prefix + "linear_0/weight"]).copy()
    b = f32(V[prefix + "linear_0/bias"]).copy()
    w[:d_model] *= scale
    b[:d_model] *= scale
    return w, b


# ---------------------------------------------------------------------------------------------
# Encoder: conv stem + transformer + every decoder layer's cross-attention K/V
# ---------------------------------------------------------------------------------------------
def cross_k_shape(dims):
    """n_layer_cross_k: each layer's K transposed, (L, N, D, T/2); head h is rows h*dh .. h*dh + dh."""
    return [dims["n_text_layer"], "n_audio", dims["n_text_state"], "T2"]


def cross_v_shape(dims):
    """n_layer_cross_v: each layer's V by head, (L, N, H*T/2, dh); head h is rows h*T/2 ..."""
    return [dims["n_text_layer"], "n_audio", "HT2", dims["n_text_state"] // dims["n_text_head"]]


def build_encoder(V, dims, metadata, half_storage, fc2_outliers=0):
    D, n_head = dims["n_audio_state"], dims["n_audio_head"]
    d_head = D // n_head
    g = Graph("whisper_encoder", half_storage)

    x = g.op("Conv", ["mel", g.init_float("conv1.weight", V["encoder/conv1/weight"]),
                      g.init("conv1.bias", f32(V["encoder/conv1/bias"]))], kernel_shape=[3], pads=[1, 1], strides=[1])
    x = g.op("Conv", [g.gelu(x), g.init_float("conv2.weight", V["encoder/conv2/weight"]),
                      g.init("conv2.bias", f32(V["encoder/conv2/bias"]))], kernel_shape=[3], pads=[1, 1], strides=[2])
    x = g.op("Transpose", [g.gelu(x)], perm=[0, 2, 1])  # N, T/2, D

    # positional embedding sliced to the actual length (sherpa-onnx's "no 30 s constraint")
    pos = g.init_float("encoder.positional_embedding", V["encoder/position_encodings/encodings"])
    t2 = g.op("Slice", [g.op("Shape", [x]), g.i64([1]), g.i64([2])])
    x = g.op("Add", [x, g.op("Slice", [pos, g.i64([0]), t2, g.i64([0])])])

    for i in range(dims["n_audio_layer"]):
        p = f"encoder/layer_{i}/"
        h = g.layer_norm(x, V[p + "self_attention/layer_norm/gamma"], V[p + "self_attention/layer_norm/beta"], f"enc{i}.attn_ln")
        w, b = fused_qkv(V, p + "self_attention/", D, d_head ** -0.5)
        q, k, v = g.op("Split", [g.linear(h, w, b, f"enc{i}.attn.qkv"), g.i64([D] * 3)], n_out=3, axis=-1)
        a = g.attention(q, k, v, n_head, d_head, D)
        a = g.linear(a, V[p + "self_attention/linear_1/weight"], V[p + "self_attention/linear_1/bias"], f"enc{i}.attn.out")
        x = g.op("Add", [x, a])
        x = g.mlp_block(x, V, p, f"enc{i}", n_outlier=fc2_outliers)
    x = g.layer_norm(x, V["encoder/layer_norm/gamma"], V["encoder/layer_norm/beta"], "enc.ln_post")

    # cross-attention K/V of all decoder layers in one MatMul: columns [k_0 | v_0 | k_1 | v_1 | ...]
    # (CT2 stores each layer's cross K,V fused as attention/linear_1), then split by head once here
    # so the decoder's steps need no transposes: K as (L, N, D, T/2), V as (L, N, H*T/2, dh)
    L, Dt, Ht = dims["n_text_layer"], dims["n_text_state"], dims["n_text_head"]
    dht = Dt // Ht
    wkv = np.concatenate([f32(V[f"decoder/layer_{i}/attention/linear_1/weight"]) for i in range(L)], axis=0)
    bkv = np.concatenate([f32(V[f"decoder/layer_{i}/attention/linear_1/bias"]) for i in range(L)], axis=0)
    kv = g.op("Reshape", [g.linear(x, wkv, bkv, "dec.cross_kv"), g.i64([0, 0, L, 2, Ht, dht])])  # N, T/2, L, 2, H, dh
    k = g.op("Transpose", [g.op("Gather", [kv, g.i64(0)], axis=3)], perm=[2, 0, 3, 4, 1])  # L, N, H, dh, T/2
    g.op("Reshape", [k, g.i64([L, 0, Dt, -1])], out="n_layer_cross_k")
    v = g.op("Transpose", [g.op("Gather", [kv, g.i64(1)], axis=3)], perm=[2, 0, 3, 1, 4])  # L, N, H, T/2, dh
    g.op("Reshape", [v, g.i64([L, 0, -1, dht])], out="n_layer_cross_v")

    return g.model(
        [helper.make_tensor_value_info("mel", TensorProto.FLOAT, ["n_audio", dims["n_mels"], "T"])],
        [helper.make_tensor_value_info("n_layer_cross_k", TensorProto.FLOAT, cross_k_shape(dims)),
         helper.make_tensor_value_info("n_layer_cross_v", TensorProto.FLOAT, cross_v_shape(dims))],
        "Whisper encoder (converted from CTranslate2 weights)",
        metadata,
    )


# ---------------------------------------------------------------------------------------------
# Decoder with a self-attention KV cache that grows by the decoded tokens
# ---------------------------------------------------------------------------------------------
def build_decoder(V, dims, alignment_heads, int8_embedding):
    D, n_head = dims["n_text_state"], dims["n_text_head"]
    d_head = D // n_head
    scale = d_head ** -0.5
    L = dims["n_text_layer"]
    g = Graph("whisper_decoder", half_storage=int8_embedding, rowwise=int8_embedding)
    emb = f32(V["decoder/embeddings/weight"])  # (n_vocab, D), tied with the output projection

    if int8_embedding:
        # symmetric per-row int8; one copy serves the lookup and the output projection
        s = np.maximum(np.abs(emb).max(axis=1), 1e-8) / 127.0
        # stored as q + 128 in uint8 with zero point 128: MatMulInteger then runs u8 x u8, which is
        # exact on every CPU; u8 x s8 on AVX2 without VNNI sums pairs in saturating int16
        # (vpmaddubsw) and corrupted ~30% of the logits (zero point ~200 x weights up to 127).
        q = np.clip(np.round(emb / s[:, None]), -127, 127).astype(np.int16)
        qT = g.init("token_embedding.uint8_T", (q.T + 128).astype(np.uint8))  # (D, n_vocab)
        zp = g.init("token_embedding.zero_point", np.array(128, dtype=np.uint8))
        sc = g.init("token_embedding.scale", s.astype(np.float32))
        rows = g.op("Transpose", [g.op("Gather", [qT, "tokens"], axis=1)], perm=[1, 2, 0])  # N, n, D
        rows = g.op("Sub", [g.op("Cast", [rows], to=TensorProto.FLOAT), g.f(128.0)])
        x = g.op("Mul", [rows, g.op("Unsqueeze", [g.op("Gather", [sc, "tokens"], axis=0), g.i64([-1])])])
    else:
        x = g.op("Gather", [g.init("token_embedding.weight", emb), "tokens"], axis=0)

    pos = g.init_float("decoder.positional_embedding", V["decoder/position_encodings/encodings"])
    n_tok = g.op("Slice", [g.op("Shape", ["tokens"]), g.i64([1]), g.i64([2])])  # (1,)
    # The caches' first row is a placeholder no query attends to (zeros): a cache of no positions
    # would be a product over an empty axis, which ONNX Runtime before 1.32 divides by zero on.
    held = g.op("Slice", [g.op("Shape", ["self_k_0"]), g.i64([0]), g.i64([1])])  # (1,): offset + 1
    offset = g.op("Sub", [held, g.i64([1])])  # (1,): positions cached
    end = g.op("Add", [offset, n_tok])  # (1,)
    x = g.op("Add", [x, g.op("Slice", [pos, offset, end, g.i64([0])])])

    # causal mask over absolute positions: the query at offset + j sees keys 0 .. offset + j, and
    # never the placeholder (key -1)
    off_s = g.op("Squeeze", [offset, g.i64([0])])
    end_s = g.op("Squeeze", [end, g.i64([0])])
    kpos = g.op("Unsqueeze", [g.op("Range", [g.i64(-1), end_s, g.i64(1)]), g.i64([0])])
    qpos = g.op("Unsqueeze", [g.op("Range", [off_s, end_s, g.i64(1)]), g.i64([1])])
    hidden = g.op("Or", [g.op("Greater", [kpos, qpos]), g.op("Less", [kpos, g.i64(0)])])
    mask = g.op("Where", [hidden, g.f(-1e9), g.f(0.0)])  # n, 1 + offset + n

    # Each layer's cross-attention K/V come as inputs of their own (cross_k_i, cross_v_i), which
    # the caller points into the encoder's one (L, A, ...) output without copying.  Gathering
    # layer i out of that output in the graph copied every layer's K/V on every step: 2.3 of
    # 13 ms per base step at 1500 frames for one audio, 12.4 of 43 ms for four.
    #
    # Several audios in one call (sessions decoded in a batch): the cross K/V hold A audios, the
    # tokens A groups of R rows each (a beam, samples), audio a's rows at a*R .. a*R + R - 1.
    # `cross_frames` (A,) is each audio's encoder frames; the padded frames after them get no
    # attention, so an audio padded to a longer one's length decodes exactly as it would alone.
    cross_shape = g.op("Shape", ["cross_k_0"])  # A, D, T/2
    n_aud = g.op("Slice", [cross_shape, g.i64([0]), g.i64([1])])  # (1,)
    t2 = g.op("Slice", [cross_shape, g.i64([2]), g.i64([3])])  # (1,)
    query_shape = g.op("Concat", [n_aud, g.i64([-1, n_head, d_head])], axis=0)
    frame = g.op("Range", [g.i64(0), g.op("Squeeze", [t2, g.i64([0])]), g.i64(1)])  # T/2
    valid = g.op("Less", [g.op("Unsqueeze", [frame, g.i64([0])]), g.op("Unsqueeze", ["cross_frames", g.i64([1])])])  # A, T/2
    cross_mask = g.op("Unsqueeze", [g.op("Where", [valid, g.f(0.0), g.f(-1e9)]), g.i64([1, 2])])  # A, 1, 1, T/2

    heads_of_layer = {}
    for layer, head in alignment_heads:
        heads_of_layer.setdefault(layer, []).append(head)
    align = []  # per alignment layer: (N, heads of that layer, n, T/2)

    # Self attention (version 5): the positions before are inputs of their own per layer,
    # self_k_i / self_v_i (1 + offset, N, D), time-major, so the caller appends each step's new
    # positions to the end of its buffer and passes a prefix of it without a copy. The graph
    # neither joins them with the new tokens nor writes them back: the scores over both parts are
    # joined (n x (offset + n) per row and head, small), and the weighted sum taken over each part
    # apart. Only the new tokens' keys and values are outputs. Version 4 joined, sliced and wrote
    # back the whole cache on every step, about nine passes over it, which at 100 positions took a
    # third of a base step and at 200 half of it.
    new_k, new_v = [], []
    for i in range(L):
        p = f"decoder/layer_{i}/"
        h = g.layer_norm(x, V[p + "self_attention/layer_norm/gamma"], V[p + "self_attention/layer_norm/beta"], f"dec{i}.attn_ln")
        w, b = fused_qkv(V, p + "self_attention/", D, scale)
        q, k, v = g.op("Split", [g.linear(h, w, b, f"dec{i}.attn.qkv"), g.i64([D] * 3)], n_out=3, axis=-1)
        qh = g.split_heads(q, n_head, d_head, [0, 2, 1, 3])  # N H n dh
        kh = g.split_heads(k, n_head, d_head, [0, 2, 3, 1])  # N H dh n
        vh = g.split_heads(v, n_head, d_head, [0, 2, 1, 3])  # N H n dh
        # (1 + offset, N, D) -> (N, H, 1 + offset, dh): one pass over the cache each, in runs of dh.
        kp, vp = (g.op("Transpose", [g.op("Reshape", [f"self_{kv}_{i}", g.i64([0, 0, n_head, d_head])])], perm=[1, 2, 0, 3])
                  for kv in ("k", "v"))
        past_scores = g.op("FusedMatMul", [qh, kp], domain="com.microsoft", transB=1)  # N H n 1+offset
        scores = g.op("Add", [g.op("Concat", [past_scores, g.op("MatMul", [qh, kh])], axis=-1), mask])  # N H n 1+offset+n
        probs = g.op("Softmax", [scores], axis=-1)
        past = g.op("MatMul", [g.op("Slice", [probs, g.i64([0]), held, g.i64([-1])]), vp])
        now = g.op("MatMul", [g.op("Slice", [probs, held, g.i64([2 ** 62]), g.i64([-1])]), vh])
        a = g.op("Reshape", [g.op("Transpose", [g.op("Add", [past, now])], perm=[0, 2, 1, 3]), g.i64([0, -1, D])])  # N n D
        for new, lst in ((k, new_k), (v, new_v)):
            lst.append(g.op("Unsqueeze", [g.op("Transpose", [new], perm=[1, 0, 2]), g.i64([0])]))  # 1 n N D
        a = g.linear(a, V[p + "self_attention/linear_1/weight"], V[p + "self_attention/linear_1/bias"], f"dec{i}.attn.out")
        x = g.op("Add", [x, a])
        # cross attention
        h = g.layer_norm(x, V[p + "attention/layer_norm/gamma"], V[p + "attention/layer_norm/beta"], f"dec{i}.cross_ln")
        q = g.linear(h, f32(V[p + "attention/linear_0/weight"]) * scale, f32(V[p + "attention/linear_0/bias"]) * scale, f"dec{i}.cross.q")
        kh = g.op("Reshape", [f"cross_k_{i}", g.i64([0, n_head, d_head, -1])])  # A, H, dh, T/2
        vh = g.op("Reshape", [f"cross_v_{i}", g.i64([0, n_head, -1, d_head])])  # A, H, T/2, dh
        # each audio's R = N / A rows (and their n tokens) are one query block of R*n rows
        qh = g.op("Transpose", [g.op("Reshape", [q, query_shape])], perm=[0, 2, 1, 3])  # A, H, R*n, dh
        scores = g.op("Add", [g.op("MatMul", [qh, kh]), cross_mask])
        probs = g.op("Softmax", [scores], axis=-1)  # A, H, R*n, T/2
        a = g.op("Transpose", [g.op("MatMul", [probs, vh])], perm=[0, 2, 1, 3])  # A, R*n, H, dh
        a = g.op("Reshape", [a, g.op("Shape", [q])])  # N, n, D
        if i in heads_of_layer:
            picked = g.op("Gather", [probs, g.i64(heads_of_layer[i])], axis=1)  # A, heads, R*n, T/2
            h_i = len(heads_of_layer[i])
            by_row = g.op("Reshape", [picked, g.op("Concat", [g.i64([0, h_i, -1]), n_tok, t2], axis=0)])  # A, heads, R, n, T/2
            by_row = g.op("Transpose", [by_row], perm=[0, 2, 1, 3, 4])  # A, R, heads, n, T/2
            align.append(g.op("Reshape", [by_row, g.op("Concat", [g.i64([-1, h_i]), n_tok, t2], axis=0)]))  # N, heads, n, T/2
        a = g.linear(a, V[p + "attention/linear_2/weight"], V[p + "attention/linear_2/bias"], f"dec{i}.cross.out")
        x = g.op("Add", [x, a])
        x = g.mlp_block(x, V, p, f"dec{i}", n_outlier=FC2_OUTLIERS if int8_embedding else 0)
    # Only the positions asked for reach the output projection (version 4): a first call over a
    # 223-token prompt needs the logits of 2 of its 227 positions, a word alignment none, and the
    # projection onto the vocabulary is the largest product of a step.
    x = g.op("Gather", [x, "logit_positions"], axis=1)  # N, n_logits, D
    x = g.layer_norm(x, V["decoder/layer_norm/gamma"], V["decoder/layer_norm/beta"], "dec.ln")

    if int8_embedding:
        # logits = (x @ q.T) * s, as dynamic-uint8(x) x uint8(q.T + 128) -> int32 (both zero
        # points subtracted by MatMulInteger): the 8-bit matrix is the only copy in memory.  Float
        # logits from a float16 table measured no better (1 of 71 words wrong either way) but hold
        # ~106 MB more for base in every loaded recognizer and take ~30 % longer per step.
        flat, rows, unflatten = g.rowwise_input(x, D)
        xq, xs, xz = g.op("DynamicQuantizeLinear", [flat], n_out=3)
        acc = g.op("Cast", [g.op("MatMulInteger", [xq, qT, xz, zp])], to=TensorProto.FLOAT)
        g.op("Mul", [g.op("Mul", [unflatten(acc, dims["n_vocab"]), rows]), g.op("Mul", [sc, xs])], out="logits")
    else:
        g.op("MatMul", [x, g.init("token_embedding.weight_t", emb.T)], out="logits")
    # The new tokens' keys and values, (L, n, N, D): what the caller appends to its caches.
    g.op("Concat", new_k, axis=0, out="new_k")
    g.op("Concat", new_v, axis=0, out="new_v")
    g.op("Identity" if len(align) == 1 else "Concat", align, out="cross_attention_weights",
         **({} if len(align) == 1 else {"axis": 1}))

    return g.model(
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["n_audio", "n_tokens"]),
         *[helper.make_tensor_value_info(f"self_{kv}_{i}", TensorProto.FLOAT, ["n_cached", "n_audio", D])
           for kv in ("k", "v") for i in range(L)],
         *[helper.make_tensor_value_info(f"cross_{kv}_{i}", TensorProto.FLOAT, shape(dims)[1:])
           for kv, shape in (("k", cross_k_shape), ("v", cross_v_shape)) for i in range(L)],
         helper.make_tensor_value_info("cross_frames", TensorProto.INT64, ["n_cross_audio"]),
         helper.make_tensor_value_info("logit_positions", TensorProto.INT64, ["n_logits"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n_audio", "n_logits", dims["n_vocab"]]),
         helper.make_tensor_value_info("new_k", TensorProto.FLOAT, [L, "n_tokens", "n_audio", D]),
         helper.make_tensor_value_info("new_v", TensorProto.FLOAT, [L, "n_tokens", "n_audio", D]),
         helper.make_tensor_value_info("cross_attention_weights", TensorProto.FLOAT,
                                       ["n_audio", len(alignment_heads), "n_tokens", "T2"])],
        "Whisper decoder with KV cache and alignment-head cross-attention (converted from CTranslate2 weights)",
    )


# ---------------------------------------------------------------------------------------------
# Vocabulary, tokens.txt, dimensions, metadata
# ---------------------------------------------------------------------------------------------
def byte_decoder():
    """Inverse of GPT-2's bytes_to_unicode()."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def load_vocab(model_dir):
    with open(os.path.join(model_dir, "vocabulary.txt"), encoding="utf-8") as f:
        vocab = f.read().split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    return vocab


def write_tokens(vocab, eot, path):
    """One line per regular token id < eot: base64(raw bytes) and the id -- what sherpa-onnx's
    export-onnx.py writes from openai-whisper's *.tiktoken files."""
    dec = byte_decoder()
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for i in range(eot):
            raw = bytes(dec[c] for c in vocab[i])
            f.write(f"{base64.b64encode(raw).decode()} {i}\n")


def make_dims(V):
    def n_layers(side):
        return len({m.group(1) for m in (re.match(rf"^{side}/layer_(\d+)/", k) for k in V) if m})

    return dict(
        n_mels=int(V["encoder/conv1/weight"].shape[1]),
        n_audio_ctx=int(V["encoder/position_encodings/encodings"].shape[0]),
        n_audio_state=int(V["encoder/position_encodings/encodings"].shape[1]),
        n_audio_head=int(V["encoder/num_heads"]),
        n_audio_layer=n_layers("encoder"),
        n_vocab=int(V["decoder/embeddings/weight"].shape[0]),
        n_text_ctx=int(V["decoder/position_encodings/encodings"].shape[0]),
        n_text_state=int(V["decoder/position_encodings/encodings"].shape[1]),
        n_text_head=int(V["decoder/num_heads"]),
        n_text_layer=n_layers("decoder"),
    )


def alignment_heads_of(config, dims):
    """The CT2 config's alignment_heads as a sorted list of (layer, head), validated."""
    heads = config.get("alignment_heads")
    if not heads:
        raise ValueError("config.json has no alignment_heads; they are needed for token timestamps")
    out = sorted({(int(layer), int(head)) for layer, head in heads})
    for layer, head in out:
        if not (0 <= layer < dims["n_text_layer"] and 0 <= head < dims["n_text_head"]):
            raise ValueError(f"alignment head {layer}:{head} outside {dims['n_text_layer']} layers x {dims['n_text_head']} heads")
    return out


def make_metadata(dims, vocab, config, name, alignment_heads, multilingual=None):
    """The encoder metadata sherpa-onnx reads: same keys and values as its export scripts write.

    multilingual defaults to openai-whisper's rule (n_vocab >= 51865)."""
    tid = {t: i for i, t in enumerate(vocab)}
    if multilingual is None:
        multilingual = dims["n_vocab"] >= 51865
    sot, eot = tid["<|startoftranscript|>"], tid["<|endoftext|>"]
    translate, transcribe = tid["<|translate|>"], tid["<|transcribe|>"]
    # language tokens sit between <|startoftranscript|> and <|translate|> (openai-whisper layout)
    lang_ids = list(range(sot + 1, translate))
    # HF-derived vocabularies spell Hebrew <|iw|>; openai-whisper (and sherpa-onnx) say "he"
    lang_codes = [{"iw": "he"}.get(vocab[i][2:-2], vocab[i][2:-2]) for i in lang_ids]
    # openai-whisper's default sot_sequence: language en, task transcribe
    sot_sequence = [sot, tid["<|en|>"], transcribe] if multilingual else [sot]
    # non-speech tokens: CT2's suppress_ids restricted to regular tokens (openai's non_speech_tokens)
    non_speech = sorted(int(i) for i in config.get("suppress_ids", []) if int(i) < eot)
    return {
        "model_type": f"whisper-{name}",
        # 2: the decoder has the cross_attention_weights output; 3: batches audios (cross_frames);
        # 4: logit_positions; 5: per-layer time-major self-attention caches in, new positions out
        "version": "5",
        "maintainer": "k2-fsa",
        **dims,
        "sot_sequence": ",".join(map(str, sot_sequence)),
        "all_language_tokens": ",".join(map(str, lang_ids)),
        "all_language_codes": ",".join(lang_codes),
        "sot": sot,
        "sot_index": 0,
        "eot": eot,
        "blank_id": tid["Ġ"],  # tokenizer.encode(" ")[0]
        "is_multilingual": int(multilingual),
        "no_speech": tid.get("<|nospeech|>", tid.get("<|nocaptions|>")),
        "non_speech_tokens": ",".join(map(str, non_speech)),
        "transcribe": transcribe,
        "translate": translate,
        "sot_prev": tid["<|startofprev|>"],
        "sot_lm": tid["<|startoflm|>"],
        "no_timestamps": tid["<|notimestamps|>"],
        "n_alignment_heads": len(alignment_heads),
        "alignment_heads": ",".join(f"{layer}:{head}" for layer, head in alignment_heads),
    }


# ---------------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------------
def quantize(src, dst, reduce_range=False):
    """MatMul weights to int8 with per-channel scales (sherpa-onnx's export uses per-tensor;
    per-channel measured ~40% lower encoder output error for +85 KB)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # silence "consider pre-processing" warnings
    try:
        m = onnx.load(src, load_external_data=False)
        keep_float = [n.name for n in m.graph.node if n.op_type == "MatMul" and "fc2_outlier" in n.input[1]]
        del m
        quantize_dynamic(model_input=src, model_output=dst, op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range,
                         nodes_to_exclude=keep_float,
                         # FusedMatMul (ONNX Runtime's) has no shape inference in onnx: its outputs are float
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        root.setLevel(level)


def convert(model_dir, out_dir, name, prefix=None, fp32_dir=None, multilingual=None, log=print, encoder_fc2_outliers=0):
    """Convert the CT2 model in model_dir; returns {"encoder", "decoder", "tokens"[, "fp32_encoder",
    "fp32_decoder"]} paths.  fp32_dir, if given, also gets the float32 graphs (for tests and the
    float reference of Benchmarks/quantization.sh).  encoder_fc2_outliers > 0 splits that many fc2
    input units of each encoder layer out of its quantization, as the decoder's FC2_OUTLIERS are."""
    t0 = time.monotonic()
    prefix = prefix or name
    V = read_ct2(os.path.join(model_dir, "model.bin"))
    vocab = load_vocab(model_dir)
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    dims = make_dims(V)
    if len(vocab) != dims["n_vocab"]:
        raise ValueError(f"vocabulary.txt has {len(vocab)} tokens, the model {dims['n_vocab']}")
    heads = alignment_heads_of(config, dims)
    md = make_metadata(dims, vocab, config, name, heads, multilingual)
    log(f"{name}: {dims['n_audio_layer']}+{dims['n_text_layer']} layers, d={dims['n_text_state']}, "
        f"n_vocab={dims['n_vocab']}, multilingual={md['is_multilingual']}, alignment heads {md['alignment_heads']}")

    os.makedirs(out_dir, exist_ok=True)
    out = {
        "encoder": os.path.join(out_dir, f"{prefix}-encoder.int8.onnx"),
        "decoder": os.path.join(out_dir, f"{prefix}-decoder.int8.onnx"),
        "tokens": os.path.join(out_dir, f"{prefix}-tokens.txt"),
    }
    with tempfile.TemporaryDirectory(prefix=".whisper-convert-", dir=out_dir) as tmp:
        staged = {k: os.path.join(tmp, os.path.basename(v)) for k, v in out.items()}
        write_tokens(vocab, md["eot"], staged["tokens"])
        for key, build in (("encoder", lambda: build_encoder(V, dims, md, half_storage=True, fc2_outliers=encoder_fc2_outliers)),
                           ("decoder", lambda: build_decoder(V, dims, heads, int8_embedding=True))):
            src = os.path.join(tmp, f"{key}.float.onnx")
            onnx.save(build(), src)
            quantize(src, staged[key], reduce_range=(key == "decoder"))
            os.remove(src)
        # quantize_dynamic keeps metadata_props; make sure of it, sherpa-onnx cannot work without
        got = {p.key: p.value for p in onnx.load(staged["encoder"], load_external_data=False).metadata_props}
        missing = [k for k, v in md.items() if got.get(k) != str(v)]
        if missing:
            raise RuntimeError(f"quantized encoder lost metadata keys {missing}")
        log(f"{name}: int8 models built ({time.monotonic() - t0:.1f}s)")
        if fp32_dir:
            os.makedirs(fp32_dir, exist_ok=True)
            out["fp32_encoder"] = os.path.join(fp32_dir, f"{prefix}-encoder.onnx")
            out["fp32_decoder"] = os.path.join(fp32_dir, f"{prefix}-decoder.onnx")
            onnx.save(build_encoder(V, dims, md, half_storage=False), out["fp32_encoder"])
            onnx.save(build_decoder(V, dims, heads, int8_embedding=False), out["fp32_decoder"])
            shutil.copyfile(staged["tokens"], os.path.join(fp32_dir, f"{prefix}-tokens.txt"))
        for key in ("encoder", "decoder", "tokens"):
            os.replace(staged[key], out[key])
    log(f"{name}: done in {time.monotonic() - t0:.1f}s")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", required=True, help="CTranslate2 Whisper dir (model.bin, vocabulary.txt, config.json)")
    ap.add_argument("--out-dir", required=True, help="where the int8 models and tokens.txt go")
    ap.add_argument("--name", required=True, help="model name for the metadata model_type, e.g. base, tiny.en")
    ap.add_argument("--prefix", help="file name prefix (default: --name), e.g. base -> base-encoder.int8.onnx")
    ap.add_argument("--fp32-dir", help="also write the float32 models here")
    ap.add_argument("--encoder-fc2-outliers", type=int, default=0,
                    help="fc2 input units per encoder layer multiplied in float (default 0)")
    args = ap.parse_args(argv)
    try:
        convert(args.model_dir, args.out_dir, args.name, args.prefix, args.fp32_dir,
                encoder_fc2_outliers=args.encoder_fc2_outliers)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"whisper-ct2-to-onnx: error: {e!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
