"""Drives Earshot's HTTP front with the unmodified `openai` client from PyPI over a Unix socket
(an httpx transport), in every response format, and prints what came back as one JSON object.

usage: openai_client_check.py SOCKET AUDIO_FILE
"""
import json
import sys

import httpx2
import openai


def main() -> None:
    socket, audio = sys.argv[1], sys.argv[2]
    http_client = httpx2.Client(transport=httpx2.HTTPTransport(uds=socket))
    client = openai.OpenAI(api_key="unused-on-a-unix-socket", base_url="http://earshot/v1",
                           http_client=http_client, max_retries=0)
    out = {}
    out["models"] = [model.id for model in client.models.list()]

    def transcribe(**options):
        with open(audio, "rb") as f:
            return client.audio.transcriptions.create(model="whisper-1", file=f, **options)

    out["json"] = transcribe().text
    out["text"] = transcribe(response_format="text")
    out["srt"] = transcribe(response_format="srt")
    out["vtt"] = transcribe(response_format="vtt")
    verbose = transcribe(response_format="verbose_json", timestamp_granularities=["word", "segment"])
    out["verbose"] = {
        "language": verbose.language,
        "duration": verbose.duration,
        "text": verbose.text,
        "segments": [{"start": s.start, "end": s.end, "text": s.text} for s in (verbose.segments or [])],
        "words": [{"word": w.word, "start": w.start, "end": w.end} for w in (verbose.words or [])],
    }
    kinds, deltas, done = [], [], None
    with open(audio, "rb") as f:
        for event in client.audio.transcriptions.create(model="whisper-1", file=f, stream=True):
            kinds.append(event.type)
            if event.type == "transcript.text.delta":
                deltas.append(event.delta)
            elif event.type == "transcript.text.done":
                done = event.text
    out["stream"] = {"types": kinds, "deltas": deltas, "done": done}
    with open(audio, "rb") as f:
        out["translation"] = client.audio.translations.create(model="whisper-1", file=f).text
    try:
        with open(audio, "rb") as f:
            client.audio.transcriptions.create(model="no-such-model", file=f)
        out["unknown_model"] = None
    except openai.NotFoundError as error:
        out["unknown_model"] = {"status": error.status_code, "code": error.code}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
