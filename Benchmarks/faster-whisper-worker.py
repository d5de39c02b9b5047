"""faster-whisper, warm, for Benchmarks/vs-faster-whisper.sh: loads one CTranslate2 model once, then
transcribes each audio path read from stdin and answers one JSON line {"text": ...} per path.

    python faster-whisper-worker.py CT2_DIR THREADS
"""
import json
import sys

from faster_whisper import WhisperModel

model = WhisperModel(sys.argv[1], device="cpu", compute_type="int8", cpu_threads=int(sys.argv[2]),
                     num_workers=1, local_files_only=True)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    segments, _ = model.transcribe(line.rstrip("\n"), language="en", beam_size=1)
    print(json.dumps({"text": " ".join(segment.text.strip() for segment in segments)}), flush=True)
