"""Times one file through three fronts of the same warm earshotd; see Benchmarks/http.sh."""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import wave

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient

LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox"


def start_daemon(bin_dir, work):
    socket = os.path.join(work, "run", "earshot.sock")
    config = os.path.join(work, "earshotd.conf")
    with open(config, "w") as f:  # defaults: the embedded catalog Scripts/setup.sh built
        f.write("")
    daemon = subprocess.Popen([os.path.join(bin_dir, "earshotd"), "--user", "--socket", socket,
                               "--state-dir", os.path.join(work, "state"), "--cache-dir", os.path.join(work, "cache"),
                               "--config", config], stderr=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(socket):
            break
        time.sleep(0.02)
    cli = os.path.join(bin_dir, "earshot")
    subprocess.run([cli, "--socket", socket, "install", "--locale", "en-US", "--module", "transcriber"], check=True, stdout=subprocess.DEVNULL)
    return daemon, socket, cli


def via_http(socket, path):
    out = subprocess.run(["curl", "-sS", "--fail", "--unix-socket", os.path.join(os.path.dirname(socket), "http.sock"),
                          "-F", f"file=@{path}", "-F", "model=transcriber", "-F", "language=en", "-F", "response_format=text",
                          "http://earshot/v1/audio/transcriptions"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def via_cli(cli, socket, path):
    out = subprocess.run([cli, "--socket", socket, "transcribe", "--locale", "en-US", path], check=True, capture_output=True, text=True)
    return out.stdout.strip()


async def via_socket(socket, path):
    with wave.open(path, "rb") as w:
        rate, channels, pcm = w.getframerate(), w.getnchannels(), w.readframes(w.getnframes())
    async with AsyncClient.from_uri("unix://" + socket) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=channels).event())
        step = rate * 2 * channels  # 1 s chunks: as fast as the daemon takes them
        for i in range(0, len(pcm), step):
            await client.write_event(AudioChunk(rate=rate, width=2, channels=channels, audio=pcm[i:i + step]).event())
        await client.write_event(AudioStop().event())
        while True:
            event = await client.read_event()
            if event is None:
                raise RuntimeError("the daemon closed the connection")
            if Transcript.is_type(event.type):
                return Transcript.from_event(event).text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--file", default=os.path.join(LIBRIVOX, "sense_and_sensibility_01_austen_64kb-0880.wav"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="es-http-bench-") as work:
        daemon, socket, cli = start_daemon(args.bin, work)
        try:
            fronts = {
                "socket (wyoming)": lambda: asyncio.run(via_socket(socket, args.file)),
                "http (curl)": lambda: via_http(socket, args.file),
                "cli (earshot)": lambda: via_cli(cli, socket, args.file),
            }
            for run in fronts.values():  # warm: model loaded, caches hot
                run()
            times = {name: [] for name in fronts}
            texts = {}
            for _ in range(args.runs):  # interleaved, so drift hits every front alike
                for name, run in fronts.items():
                    began = time.perf_counter()
                    texts[name] = run()
                    times[name].append(time.perf_counter() - began)
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
    base = statistics.median(times["socket (wyoming)"])
    print(f"file: {os.path.basename(args.file)}, {args.runs} interleaved runs each, warm, median wall time")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:18} {median * 1000:8.1f} ms   {median / base:5.2f}x socket   text: {texts[name][:60]}")
    ratio = statistics.median(times["http (curl)"]) / base
    print(f"HTTP / socket: {ratio:.3f}x (goal <= 1.05x)")
    sys.exit(0)


if __name__ == "__main__":
    main()
