#!/usr/bin/env python3
"""End-to-end check of converted Whisper models in the installed sherpa-onnx C library.

Usage: verify-whisper-models.py MODELS_DIR
  MODELS_DIR holds whisper-base/ and whisper-tiny.en/ as build-whisper-models.sh writes them.

Compiles whisper-verify.c (beside this file) against /usr/local (sherpa-onnx C API), then
  1. transcribes the LibriVox utterances of pocketsphinx's test data with both models, with
     token timestamps, and reports WER against the reference transcription and whether the
     timestamps are present, non-decreasing and inside the audio;
  2. on the multilingual base model, with espeak-ng speech in es/de/fr (plus English):
     language auto-detection (language ""), the recognizer-wide language, the per-stream
     options "language"/"task", SherpaOnnxOfflineRecognizerSetConfig, and task translate.
Exits non-zero when a LibriVox check fails (WER above the limit, missing/unordered timestamps).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox"
WER_LIMIT = {"whisper-base": 0.05, "whisper-tiny.en": 0.10}
SPEECH = {
    "es": "Buenos días. Hoy vamos a hablar sobre el tiempo y las noticias de la ciudad. Mañana lloverá por la tarde.",
    "de": "Guten Morgen. Heute sprechen wir über das Wetter und die Nachrichten aus der Stadt. Morgen wird es am Nachmittag regnen.",
    "fr": "Bonjour à tous. Aujourd'hui nous allons parler du temps et des nouvelles de la ville. Demain il pleuvra l'après-midi.",
}


def words(text):
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^a-z' ]+", " ", text)
    return ["mister" if w == "mr" else w for w in text.split()]


def edit_distance(ref, hyp):
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[-1]


def references():
    refs = {}
    with open(os.path.join(LIBRIVOX, "transcription"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*<s>(.*)</s>\s*\((\S+)\)", line)
            if m:
                refs[m.group(2)] = m.group(1).split()
    return refs


class Verifier:
    def __init__(self, models_dir, tmp):
        self.models_dir = models_dir
        self.tool = os.path.join(tmp, "whisper-verify")
        subprocess.run(["cc", "-O2", "-o", self.tool, os.path.join(HERE, "whisper-verify.c"),
                        "-I/usr/local/include", "-L/usr/local/lib", "-lsherpa-onnx-c-api",
                        "-Wl,-rpath,/usr/local/lib"], check=True)

    def run(self, model, files, *opts):
        name = model.split("-", 1)[1]
        d = os.path.join(self.models_dir, model)
        cmd = [self.tool, "-e", f"{d}/{name}-encoder.int8.onnx", "-d", f"{d}/{name}-decoder.int8.onnx",
               "-t", f"{d}/{name}-tokens.txt", *opts, *files]
        p = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace")
        results = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        errors = [line for line in p.stderr.splitlines() if line.strip() and "recognizer created" not in line]
        return p.returncode, results, errors


def librivox(v):
    refs = references()
    files = [os.path.join(LIBRIVOX, k + ".wav") for k in sorted(refs)]
    ok = True
    for model in ("whisper-base", "whisper-tiny.en"):
        opts = ("-l", "en") if model == "whisper-base" else ()
        rc, results, errors = v.run(model, files, *opts)
        if rc != 0 or len(results) != len(files):
            print(f"FAIL {model}: rc={rc}, {len(results)} results; {errors}")
            ok = False
            continue
        n_err = n_ref = 0
        audio = decode = 0.0
        print(f"== {model} (LibriVox, token timestamps on)")
        for r, f in zip(results, files):
            ref = [w for w in refs[os.path.basename(f)[:-4]]]
            e = edit_distance(words(" ".join(ref)), words(r["text"]))
            n_err += e
            n_ref += len(ref)
            audio += r["duration"]
            decode += r["decode_seconds"]
            ts = r["timestamps"]
            problems = []
            if not ts or len(ts) != len(r["tokens"]):
                problems.append("timestamps missing")
            else:
                if any(b < a for a, b in zip(ts, ts[1:])):
                    problems.append("timestamps decrease")
                if ts[-1] > r["duration"]:
                    problems.append("timestamp after the end of the audio")
            ok &= not problems
            print(f"  {os.path.basename(f)}  {r['decode_seconds']:.2f}s  lang={r['lang']!r}  errors={e}  "
                  f"{'; '.join(problems) or 'timestamps ok'}")
            print(f"    {r['text']}")
            if ts:
                print("    " + " ".join(f"{t.strip() or '_'}@{s:.2f}+{d:.2f}"
                                        for t, s, d in zip(r["tokens"], ts, r["durations"] or [0] * len(ts))))
        wer = n_err / n_ref
        print(f"  WER {wer:.2%} ({n_err}/{n_ref} words), {decode:.2f}s decoding {audio:.1f}s audio "
              f"(RTF {decode / audio:.3f})")
        if wer > WER_LIMIT[model]:
            print(f"FAIL {model}: WER {wer:.2%} > {WER_LIMIT[model]:.0%}")
            ok = False
    return ok


def languages(v, tmp):
    if not shutil.which("espeak-ng") or not shutil.which("sox"):
        print("(espeak-ng or sox missing: language checks skipped)")
        return
    wavs = {}
    for lang, text in SPEECH.items():
        raw, wav = os.path.join(tmp, f"{lang}.22k.wav"), os.path.join(tmp, f"{lang}.wav")
        subprocess.run(["espeak-ng", "-v", lang, "-s", "140", "-w", raw, text], check=True)
        subprocess.run(["sox", "-D", raw, "-r", "16000", "-b", "16", "-c", "1", wav], check=True)
        wavs[lang] = wav
    wavs["en"] = os.path.join(LIBRIVOX, "sense_and_sensibility_01_austen_64kb-0930.wav")
    all_files = [wavs[k] for k in ("en", "es", "de", "fr")]
    cases = [
        ("language '' (auto-detect)", all_files, ("-l", "",)),
        ("language 'de' in the recognizer config", [wavs["de"]], ("-l", "de")),
        ("config 'en' + per-stream option language=de", [wavs["de"]], ("-l", "en", "-L", "de")),
        ("config '' + per-stream option language=en", [wavs["de"]], ("-l", "", "-L", "en")),
        ("config 'de' + per-stream option task=translate", [wavs["de"]], ("-l", "de", "-K", "translate")),
        ("config 'en' then SetConfig language=de", [wavs["de"]], ("-l", "en", "-S", "de")),
        ("config 'de' then SetConfig task=translate", [wavs["de"]], ("-l", "de", "-R", "translate")),
        ("task translate, language '' (auto)", all_files[1:], ("-l", "", "-T", "translate")),
        ("language 'xx' (not a Whisper language)", [wavs["de"]], ("-l", "xx")),
    ]
    print("== whisper-base languages (espeak-ng speech; en = LibriVox)")
    for title, files, opts in cases:
        rc, results, errors = v.run("whisper-base", files, *opts)
        print(f"  {title}: exit {rc}")
        for f, r in zip(files, results):
            ts = "timestamps" if r["timestamps"] else "NO timestamps"
            print(f"    {os.path.basename(f)[:12]:12} lang={r['lang']!r} {r['decode_seconds']:.2f}s {ts}: {r['text']}")
        for e in errors:
            print(f"    stderr: {e}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        v = Verifier(sys.argv[1], tmp)
        ok = librivox(v)
        languages(v, tmp)
    print("verify-whisper-models: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
