"""faster-whisper, warm, for Benchmarks/vs-peers.sh: loads one CTranslate2 model once, then
answers one JSON line {"text": ...} per request line read from stdin. A request is a JSON object
{"path": AUDIO, "prompted": true|false, "beam": N}: "prompted" is faster-whisper's
condition_on_previous_text (each 30 s window decoded with the text before it as Whisper's prompt;
its default, true), "beam" its beam_size (its default, 5).

    python faster-whisper-worker.py CT2_DIR THREADS [COMPUTE_TYPE]

COMPUTE_TYPE is CTranslate2's (default int8; float32 is the float reference pipeline).
"""
import json
import sys

from faster_whisper import WhisperModel

model = WhisperModel(sys.argv[1], device="cpu", compute_type=sys.argv[3] if len(sys.argv) > 3 else "int8",
                     cpu_threads=int(sys.argv[2]), num_workers=1, local_files_only=True)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    segments, _ = model.transcribe(request["path"], language="en", beam_size=request.get("beam", 5),
                                   condition_on_previous_text=request.get("prompted", True))
    print(json.dumps({"text": " ".join(segment.text.strip() for segment in segments)}), flush=True)
