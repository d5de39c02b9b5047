"""whisper.cpp, warm, for Benchmarks/vs-peers.sh: the libwhisper of the pywhispercpp wheel loads
one ggml model once (Benchmarks/whisper-ct2-to-ggml.py writes it from the same CTranslate2 weights
the other engines use), then answers one JSON line {"text": ...} per request line read from stdin
({"path": AUDIO}). Decoding as whisper.cpp's command line does by default: beam search of 5,
temperature fallback, no text carried between its 30 s windows (no_context).

    python whisper-cpp-worker.py MODEL.bin THREADS
"""
import json
import sys

from pywhispercpp.model import Model

model = Model(sys.argv[1], params_sampling_strategy=1, redirect_whispercpp_logs_to=None, n_threads=int(sys.argv[2]),
              language="en", print_progress=False, print_realtime=False, beam_search={"beam_size": 5, "patience": -1.0})
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    segments = model.transcribe(request["path"])
    print(json.dumps({"text": " ".join(segment.text.strip() for segment in segments)}), flush=True)
