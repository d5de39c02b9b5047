"""A Wyoming ASR client (the PyPI `wyoming` package, as Home Assistant uses it) for
Benchmarks/wyoming-latency.sh: reads one JSON request per line on stdin and answers one JSON line.

    {"wait": URI}                                  -> {"ready": true} once URI answers `describe`
    {"uri": URI, "path": WAV, "name": NAME|null}   -> {"text": ..., "latency_ms": ...}

A transcription opens a connection, sends `transcribe` (language en, and NAME when given),
`audio-start`, the WAV's PCM in 1024-frame `audio-chunk`s at real-time pace (each sent once its
last frame would have been recorded), and `audio-stop` right after the last;
the latency is from writing `audio-stop` to reading `transcript`.
"""
import asyncio
import json
import sys
import time
import wave

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient
from wyoming.info import Describe, Info

FRAMES_PER_CHUNK = 1024


async def wait_ready(uri, timeout=300):
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with AsyncClient.from_uri(uri) as client:
                await client.write_event(Describe().event())
                while True:
                    event = await asyncio.wait_for(client.read_event(), 30)
                    if event is None:
                        break
                    if Info.is_type(event.type):
                        return
        except (OSError, asyncio.TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{uri} did not answer describe within {timeout} s")
        await asyncio.sleep(0.2)


async def transcribe(uri, path, name):
    with wave.open(path, "rb") as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        pcm = w.readframes(w.getnframes())
    step = FRAMES_PER_CHUNK * width * channels
    async with AsyncClient.from_uri(uri) as client:
        await client.write_event(Transcribe(name=name, language="en").event())
        await client.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
        began = time.monotonic()
        for offset in range(0, len(pcm), step):
            chunk = pcm[offset:offset + step]
            # Real time, as from a microphone: a chunk leaves once its last frame has been "spoken".
            due = began + (offset + len(chunk)) / (rate * width * channels)
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await client.write_event(AudioChunk(rate=rate, width=width, channels=channels, audio=chunk).event())
        await client.write_event(AudioStop().event())
        stopped = time.monotonic()
        while True:
            event = await asyncio.wait_for(client.read_event(), 300)
            if event is None:
                raise RuntimeError(f"{uri} closed the connection before its transcript")
            if Transcript.is_type(event.type):
                return Transcript.from_event(event).text, (time.monotonic() - stopped) * 1000


def main():
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:
            asyncio.run(wait_ready(request["wait"]))
            answer = {"ready": True}
        else:
            text, latency = asyncio.run(transcribe(request["uri"], request["path"], request.get("name")))
            answer = {"text": text, "latency_ms": latency}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
