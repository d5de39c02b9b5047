// Transcribe WAV files with a converted Whisper model through sherpa-onnx's C API and print one
// JSON object per file: text, lang, tokens, per-token timestamps/durations, decode seconds.
//
// Build: cc -O2 -o whisper-verify whisper-verify.c -I/usr/local/include
//          -L/usr/local/lib -lsherpa-onnx-c-api -Wl,-rpath,/usr/local/lib
// Usage: whisper-verify -e ENC -d DEC -t TOKENS [-l LANG] [-T TASK] [-L STREAM_LANG]
//                       [-K STREAM_TASK] [-S LANG] [-R TASK] [-n THREADS] [-x] [-v] FILE.wav...
//   -l/-T   recognizer-wide language / task (SherpaOnnxOfflineWhisperModelConfig)
//   -L/-K   per-stream options "language" / "task" (SherpaOnnxOfflineStreamSetOption)
//   -S/-R   language / task changed after creation with SherpaOnnxOfflineRecognizerSetConfig
//   -x      do not request token timestamps; -v sherpa-onnx debug output
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sherpa-onnx/c-api/c-api.h"

static void json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; ++p) {
    if (*p == '"' || *p == '\\') {
      printf("\\%c", *p);
    } else if (*p < 0x20) {
      printf("\\u%04x", *p);
    } else {
      putchar(*p);
    }
  }
  putchar('"');
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const char *enc = NULL, *dec = NULL, *tokens = NULL, *lang = "", *task = "transcribe";
  const char *stream_lang = NULL, *stream_task = NULL, *set_lang = NULL, *set_task = NULL;
  int threads = 2, timestamps = 1, debug = 0, c;
  while ((c = getopt(argc, argv, "e:d:t:l:T:L:K:S:R:n:xv")) != -1) {
    switch (c) {
      case 'e': enc = optarg; break;
      case 'd': dec = optarg; break;
      case 't': tokens = optarg; break;
      case 'l': lang = optarg; break;
      case 'T': task = optarg; break;
      case 'L': stream_lang = optarg; break;
      case 'K': stream_task = optarg; break;
      case 'S': set_lang = optarg; break;
      case 'R': set_task = optarg; break;
      case 'n': threads = atoi(optarg); break;
      case 'x': timestamps = 0; break;
      case 'v': debug = 1; break;
      default: return 2;
    }
  }
  if (!enc || !dec || !tokens || optind >= argc) {
    fprintf(stderr, "usage: %s -e ENC -d DEC -t TOKENS [options] FILE.wav...\n", argv[0]);
    return 2;
  }

  SherpaOnnxOfflineRecognizerConfig config;
  memset(&config, 0, sizeof(config));
  config.feat_config.sample_rate = 16000;
  config.feat_config.feature_dim = 80;
  config.model_config.whisper.encoder = enc;
  config.model_config.whisper.decoder = dec;
  config.model_config.whisper.language = lang;
  config.model_config.whisper.task = task;
  config.model_config.whisper.tail_paddings = -1;
  config.model_config.whisper.enable_token_timestamps = timestamps;
  config.model_config.tokens = tokens;
  config.model_config.num_threads = threads;
  config.model_config.provider = "cpu";
  config.model_config.debug = debug;
  config.decoding_method = "greedy_search";

  double t0 = now();
  const SherpaOnnxOfflineRecognizer *rec = SherpaOnnxCreateOfflineRecognizer(&config);
  if (!rec) {
    fprintf(stderr, "failed to create the recognizer\n");
    return 1;
  }
  fprintf(stderr, "recognizer created in %.2fs\n", now() - t0);
  if (set_lang || set_task) {
    if (set_lang) config.model_config.whisper.language = set_lang;
    if (set_task) config.model_config.whisper.task = set_task;
    SherpaOnnxOfflineRecognizerSetConfig(rec, &config);
  }

  int status = 0;
  for (int i = optind; i < argc; ++i) {
    const SherpaOnnxWave *wave = SherpaOnnxReadWave(argv[i]);
    if (!wave) {
      fprintf(stderr, "cannot read %s\n", argv[i]);
      status = 1;
      continue;
    }
    const SherpaOnnxOfflineStream *stream = SherpaOnnxCreateOfflineStream(rec);
    if (stream_lang) SherpaOnnxOfflineStreamSetOption(stream, "language", stream_lang);
    if (stream_task) SherpaOnnxOfflineStreamSetOption(stream, "task", stream_task);
    SherpaOnnxAcceptWaveformOffline(stream, wave->sample_rate, wave->samples, wave->num_samples);
    double t = now();
    SherpaOnnxDecodeOfflineStream(rec, stream);
    double elapsed = now() - t;
    const SherpaOnnxOfflineRecognizerResult *r = SherpaOnnxGetOfflineStreamResult(stream);

    printf("{\"file\": ");
    json_string(argv[i]);
    printf(", \"duration\": %.3f, \"decode_seconds\": %.3f, \"text\": ",
           (double)wave->num_samples / wave->sample_rate, elapsed);
    json_string(r->text);
    printf(", \"lang\": ");
    json_string(r->lang);
    printf(", \"tokens\": [");
    for (int k = 0; k < r->count; ++k) {
      if (k) printf(", ");
      json_string(r->tokens_arr[k]);
    }
    printf("], \"timestamps\": ");
    if (r->timestamps) {
      putchar('[');
      for (int k = 0; k < r->count; ++k) printf("%s%.3f", k ? ", " : "", r->timestamps[k]);
      putchar(']');
    } else {
      printf("null");
    }
    printf(", \"durations\": ");
    if (r->durations) {
      putchar('[');
      for (int k = 0; k < r->count; ++k) printf("%s%.3f", k ? ", " : "", r->durations[k]);
      putchar(']');
    } else {
      printf("null");
    }
    printf("}\n");
    fflush(stdout);

    SherpaOnnxDestroyOfflineRecognizerResult(r);
    SherpaOnnxDestroyOfflineStream(stream);
    SherpaOnnxFreeWave(wave);
  }
  SherpaOnnxDestroyOfflineRecognizer(rec);
  return status;
}
