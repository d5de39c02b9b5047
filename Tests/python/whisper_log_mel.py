#!/usr/bin/env python3
"""The float64 reference of Whisper's log-mel spectrogram, for EarshotWhisperTests.

Written from OpenAI's definition (whisper/audio.py, librosa.filters.mel): a periodic Hann window
of 400 samples, hop 160, centred frames with reflect padding, |STFT|^2 without the last frame,
Slaney-normalised mel filters (fmin 0, fmax 8000), log10 clamped at 1e-10, floored at the
maximum minus 8, then (x + 4) / 4. numpy's FFT, double precision throughout.

Usage: whisper_log_mel.py N_MELS < samples.f32 > features.f32   (frame-major float32 out)
"""
import sys

import numpy as np

N_FFT, HOP, RATE = 400, 160, 16000


def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    linear = f / (200.0 / 3)
    logstep = np.log(6.4) / 27.0
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / logstep, linear)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    logstep = np.log(6.4) / 27.0
    return np.where(m >= 15.0, 1000.0 * np.exp(logstep * (m - 15.0)), m * (200.0 / 3))


def filters(n_mels):
    fft_freqs = np.arange(N_FFT // 2 + 1) * RATE / N_FFT
    mel_points = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(RATE / 2), n_mels + 2))
    spacing = np.diff(mel_points)
    ramps = mel_points[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / spacing[:-1, None]
    upper = ramps[2:] / spacing[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_points[2:] - mel_points[:-2]))[:, None]


def log_mel(samples, n_mels):
    padded = np.pad(samples.astype(np.float64), N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    count = 1 + (len(padded) - N_FFT) // HOP
    frames = np.stack([padded[i * HOP:i * HOP + N_FFT] * window for i in range(count)])
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    mel = power[:-1] @ filters(n_mels).T
    spec = np.log10(np.maximum(mel, 1e-10))
    spec = np.maximum(spec, spec.max() - 8.0)
    return (spec + 4.0) / 4.0


if __name__ == "__main__":
    audio = np.frombuffer(sys.stdin.buffer.read(), dtype=np.float32)
    sys.stdout.buffer.write(log_mel(audio, int(sys.argv[1])).astype(np.float32).tobytes())
