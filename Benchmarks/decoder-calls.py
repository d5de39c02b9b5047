#!/usr/bin/env python3
"""Times the decoder graph's calls of two conversions (decoder-calls.sh): BASELINE_DIR CURRENT_DIR LABEL.

Each kind of call Earshot's decoder makes, on random cross-attention keys and values of 800
encoder frames (a 6 s utterance with its tail): beam-5 steps (5 rows, 1 token, 20, 50, 100 and 200
positions cached), a first call of 4 tokens, a first call after a 100-token prompt, and a word
alignment of 30 tokens (attention weights wanted). A graph with a `logit_positions` input gets
the positions the decoder asks for (the start-of-transcript's and the last token's; the
alignment's last); the logits it reads are compared with the other graph's at those positions.
Either graph may take its self-attention cache as converter version 5 does (each layer's an input
of its own, time-major after a placeholder row; only the new positions out) or as before (one
(layers, rows, cached, state) input with `offset`; the grown cache out).
"""
import sys
import time

import numpy as np
import onnxruntime as ort

FRAMES = 800
CALLS = [  # name, rows, tokens, cached, positions read, extra outputs
    ("beam-5 step, 20 cached", 5, 1, 20, [0], []),
    ("beam-5 step, 50 cached", 5, 1, 50, [0], []),
    ("beam-5 step, 100 cached", 5, 1, 100, [0], []),
    ("beam-5 step, 200 cached", 5, 1, 200, [0], []),
    ("first call, 4 tokens", 1, 4, 0, [0, 3], []),
    ("first call, prompt 100 + 4", 1, 104, 0, [101, 103], []),
    ("word alignment, 30 tokens", 1, 30, 0, [29], ["cross_attention_weights"]),
]


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def feed(graph, layers, state, heads, rows, tokens, cached, positions):
    rng = np.random.default_rng(0)
    inputs = {"tokens": np.full((rows, tokens), 220, np.int64), "cross_frames": np.array([FRAMES], np.int64)}
    cache = rng.standard_normal((layers, rows, cached, state)).astype(np.float32)
    if "offset" in {i.name for i in graph.get_inputs()}:
        inputs.update({"in_n_layer_self_k_cache": cache, "in_n_layer_self_v_cache": cache, "offset": np.array([cached], np.int64)})
    else:
        for layer in range(layers):
            held = np.concatenate([np.zeros((1, rows, state), np.float32), cache[layer].transpose(1, 0, 2)])
            inputs[f"self_k_{layer}"] = inputs[f"self_v_{layer}"] = np.ascontiguousarray(held)
    for layer in range(layers):
        inputs[f"cross_k_{layer}"] = rng.standard_normal((1, state, FRAMES)).astype(np.float32)
        inputs[f"cross_v_{layer}"] = rng.standard_normal((1, heads * FRAMES, state // heads)).astype(np.float32)
    if "logit_positions" in {i.name for i in graph.get_inputs()}:
        inputs["logit_positions"] = np.array(positions, np.int64)
    return inputs


def best(graph, outputs, inputs):
    graph.run(outputs, inputs)
    times = []
    for _ in range(15):
        start = time.perf_counter()
        graph.run(outputs, inputs)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def logits_read(graph, inputs, positions):
    logits = graph.run(["logits"], inputs)[0]
    return logits if "logit_positions" in inputs else logits[:, positions]


def main():
    baseline_dir, current_dir, label = sys.argv[1:4]
    print(f"decoder-calls: ONNX Runtime {ort.__version__}, 2 threads, {FRAMES} encoder frames, best of 15; baseline: the converter at {label}")
    for name, layers, state, heads in (("tiny.en", 4, 384, 6), ("base", 6, 512, 8)):
        graphs = [session(f"{d}/{name}/{name}-decoder.int8.onnx") for d in (baseline_dir, current_dir)]
        print(f"\nWhisper {name}")
        for call, rows, tokens, cached, positions, extra in CALLS:
            inputs = [feed(g, layers, state, heads, rows, tokens, cached, positions) for g in graphs]
            old, new = (best(g, [o.name for o in g.get_outputs()][:3] + extra, i) for g, i in zip(graphs, inputs))
            read = [logits_read(g, i, positions) for g, i in zip(graphs, inputs)]
            difference = float(np.abs(read[0] - read[1]).max())
            print(f"  {call:28s} baseline {old:7.2f} ms  current {new:7.2f} ms  ratio {new / old:.2f}x  "
                  f"logits read {'identical' if difference == 0 else f'within {difference:.2g}'}")


if __name__ == "__main__":
    main()
