// The engine's own anonymous memory, without Earshot: creates, uses and destroys a silero VAD and
// then a Whisper model through sherpa-onnx's C API (what earshot-engine links), trimming the heap
// after each as the engine does, and prints RssAnon (kB) at each step as "STEP KB".
//
//   engine-alone VAD_MODEL WHISPER_DIR PREFIX WAV
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "sherpa-onnx/c-api/c-api.h"

static void report(const char *step) {
  FILE *status = fopen("/proc/self/status", "r");
  char line[256];
  while (status && fgets(line, sizeof line, status)) {
    long kb;
    if (sscanf(line, "RssAnon: %ld", &kb) == 1) printf("%s %ld\n", step, kb);
  }
  if (status) fclose(status);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: engine-alone VAD_MODEL WHISPER_DIR PREFIX WAV\n");
    return 2;
  }
  // as earshot-engine: MemoryReclaim.keepLargeBlocksReturnable(above: EngineServer.mmapThreshold)
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  report("start");

  SherpaOnnxVadModelConfig vad_config;
  memset(&vad_config, 0, sizeof vad_config);
  vad_config.silero_vad.model = argv[1];
  vad_config.silero_vad.threshold = 0.5f;
  vad_config.silero_vad.min_silence_duration = 0.5f;
  vad_config.silero_vad.min_speech_duration = 0.25f;
  vad_config.silero_vad.max_speech_duration = 20;
  vad_config.silero_vad.window_size = 512;
  vad_config.sample_rate = 16000;
  vad_config.num_threads = 1;
  vad_config.provider = "cpu";
  const SherpaOnnxVoiceActivityDetector *vad = SherpaOnnxCreateVoiceActivityDetector(&vad_config, 32);
  if (!vad) return 1;
  float silence[1600] = {0};
  for (int i = 0; i < 70; ++i) SherpaOnnxVoiceActivityDetectorAcceptWaveform(vad, silence, 1600);
  SherpaOnnxDestroyVoiceActivityDetector(vad);
  malloc_trim(0);
  report("vad_unloaded");

  char encoder[1024], decoder[1024], tokens[1024];
  snprintf(encoder, sizeof encoder, "%s/%s-encoder.int8.onnx", argv[2], argv[3]);
  snprintf(decoder, sizeof decoder, "%s/%s-decoder.int8.onnx", argv[2], argv[3]);
  snprintf(tokens, sizeof tokens, "%s/%s-tokens.txt", argv[2], argv[3]);
  SherpaOnnxOfflineRecognizerConfig config;
  memset(&config, 0, sizeof config);
  config.feat_config.sample_rate = 16000;
  config.feat_config.feature_dim = 80;
  config.model_config.whisper.encoder = encoder;
  config.model_config.whisper.decoder = decoder;
  config.model_config.whisper.language = "en";
  config.model_config.whisper.task = "transcribe";
  config.model_config.whisper.enable_token_timestamps = 1;
  config.model_config.tokens = tokens;
  config.model_config.num_threads = 2;
  config.model_config.provider = "cpu";
  config.decoding_method = "greedy_search";
  const SherpaOnnxOfflineRecognizer *recognizer = SherpaOnnxCreateOfflineRecognizer(&config);
  const SherpaOnnxWave *wave = SherpaOnnxReadWave(argv[4]);
  if (!recognizer || !wave) return 1;
  for (int i = 0; i < 3; ++i) {
    const SherpaOnnxOfflineStream *stream = SherpaOnnxCreateOfflineStream(recognizer);
    SherpaOnnxAcceptWaveformOffline(stream, wave->sample_rate, wave->samples, wave->num_samples);
    SherpaOnnxDecodeOfflineStream(recognizer, stream);
    SherpaOnnxDestroyOfflineRecognizerResult(SherpaOnnxGetOfflineStreamResult(stream));
    SherpaOnnxDestroyOfflineStream(stream);
  }
  report("whisper_used");
  SherpaOnnxDestroyOfflineRecognizer(recognizer);
  SherpaOnnxFreeWave(wave);
  malloc_trim(0);
  report("whisper_unloaded");
  return 0;
}
