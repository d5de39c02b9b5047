// The engine's own anonymous memory, without Earshot: creates, uses and destroys a silero VAD
// through sherpa-onnx's C API and then a Whisper model through ONNX Runtime's (what earshot-engine
// links for each), trimming the heap after each as the engine does, and prints RssAnon (kB) at
// each step as "STEP KB".
//
//   engine-alone VAD_MODEL WHISPER_DIR PREFIX
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "onnxruntime_c_api.h"
#include "sherpa-onnx/c-api/c-api.h"

static int check(const OrtApi *ort, OrtStatus *status) {
  if (!status) return 0;
  fprintf(stderr, "engine-alone: %s\n", ort->GetErrorMessage(status));
  ort->ReleaseStatus(status);
  return 1;
}

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
  if (argc != 4) {
    fprintf(stderr, "usage: engine-alone VAD_MODEL WHISPER_DIR PREFIX\n");
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

  // Whisper through ONNX Runtime's C API, as earshot-engine's decoder drives it: both graphs
  // with 2 threads, three decodes' worth of runs at the largest size a decode takes (30 s of
  // features; a beam of 5 for 20 steps), then both sessions released.
  const OrtApi *ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
  OrtEnv *env = NULL;
  OrtSessionOptions *options = NULL;
  OrtSession *encoder = NULL, *decoder = NULL;
  OrtMemoryInfo *memory = NULL;
  char path[1024];
  if (check(ort, ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "engine-alone", &env)) ||
      check(ort, ort->CreateSessionOptions(&options)) || check(ort, ort->SetIntraOpNumThreads(options, 2)) ||
      check(ort, ort->SetInterOpNumThreads(options, 1)) ||
      check(ort, ort->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL)) ||
      check(ort, ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory)))
    return 1;
  snprintf(path, sizeof path, "%s/%s-encoder.int8.onnx", argv[2], argv[3]);
  // The encoder without a memory pattern, the decoder with one, as the engine loads them.
  if (check(ort, ort->DisableMemPattern(options)) || check(ort, ort->CreateSession(env, path, options, &encoder))) return 1;
  snprintf(path, sizeof path, "%s/%s-decoder.int8.onnx", argv[2], argv[3]);
  if (check(ort, ort->EnableMemPattern(options)) || check(ort, ort->CreateSession(env, path, options, &decoder))) return 1;

  enum { MELS = 80, FRAMES = 3000, LAYERS = 6, STATE = 512, BEAM = 5, STEPS = 20 };
  static float mel[MELS * FRAMES];
  int64_t mel_shape[3] = {1, MELS, FRAMES};
  for (int decode = 0; decode < 3; ++decode) {
    OrtValue *input = NULL, *cross[2] = {NULL, NULL};
    const char *mel_name[] = {"mel"}, *cross_names[] = {"n_layer_cross_k", "n_layer_cross_v"};
    if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, mel, sizeof mel, mel_shape, 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &input)) ||
        check(ort, ort->Run(encoder, NULL, mel_name, (const OrtValue *const *)&input, 1, cross_names, 2, cross)))
      return 1;
    // each layer's K/V as inputs of their own, over the encoder's output (as the engine does)
    float *data[2];
    int64_t layer_shape[2][3];
    for (int kv = 0; kv < 2; ++kv) {
      OrtTensorTypeAndShapeInfo *info = NULL;
      int64_t dims[4];
      if (check(ort, ort->GetTensorMutableData(cross[kv], (void **)&data[kv])) ||
          check(ort, ort->GetTensorTypeAndShape(cross[kv], &info)) || check(ort, ort->GetDimensions(info, dims, 4)))
        return 1;
      ort->ReleaseTensorTypeAndShapeInfo(info);
      memcpy(layer_shape[kv], dims + 1, sizeof layer_shape[kv]);
    }
    size_t layer_size[2] = {(size_t)(layer_shape[0][0] * layer_shape[0][1] * layer_shape[0][2]),
                            (size_t)(layer_shape[1][0] * layer_shape[1][1] * layer_shape[1][2])};
    const char *names[3 + 4 * LAYERS];
    OrtValue *values[3 + 4 * LAYERS];
    char layer_names[4 * LAYERS][32];
    int64_t tokens[BEAM], frames = layer_shape[0][2], last_position = 0;
    for (int row = 0; row < BEAM; ++row) tokens[row] = 50258;
    int64_t token_shape[2] = {BEAM, 1}, one[1] = {1}, cache_shape[3] = {1, BEAM, STATE};
    /* converter version 5: each layer's self-attention keys and values, time-major after a
       placeholder row of zeros, where the caller keeps them */
    static float cache[2 * LAYERS][(STEPS + 1) * BEAM * STATE];
    for (int step = 0; step < STEPS; ++step) {
      cache_shape[0] = 1 + step;
      int n = 0;
      names[n] = "tokens";
      if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, tokens, sizeof tokens, token_shape, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &values[n++])))
        return 1;
      for (int kv = 0; kv < 2; ++kv)
        for (int layer = 0; layer < LAYERS; ++layer) {
          snprintf(layer_names[2 * LAYERS + kv * LAYERS + layer], 32, "self_%c_%d", kv ? 'v' : 'k', layer);
          names[n] = layer_names[2 * LAYERS + kv * LAYERS + layer];
          if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, cache[kv * LAYERS + layer], sizeof(float) * (1 + step) * BEAM * STATE,
                                                             cache_shape, 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &values[n++])))
            return 1;
        }
      names[n] = "cross_frames";
      if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, &frames, sizeof frames, one, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &values[n++])))
        return 1;
      names[n] = "logit_positions"; /* converter version 4: the one token's logits */
      if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, &last_position, sizeof last_position, one, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &values[n++])))
        return 1;
      for (int kv = 0; kv < 2; ++kv)
        for (int layer = 0; layer < LAYERS; ++layer) {
          snprintf(layer_names[kv * LAYERS + layer], 32, "cross_%c_%d", kv ? 'v' : 'k', layer);
          names[n] = layer_names[kv * LAYERS + layer];
          if (check(ort, ort->CreateTensorWithDataAsOrtValue(memory, data[kv] + layer * layer_size[kv], sizeof(float) * layer_size[kv],
                                                             layer_shape[kv], 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &values[n++])))
            return 1;
        }
      const char *out_names[] = {"logits"};
      OrtValue *logits = NULL;
      if (check(ort, ort->Run(decoder, NULL, names, (const OrtValue *const *)values, n, out_names, 1, &logits))) return 1;
      ort->ReleaseValue(logits);
      for (int i = 0; i < n; ++i) ort->ReleaseValue(values[i]);
    }
    ort->ReleaseValue(cross[0]);
    ort->ReleaseValue(cross[1]);
    ort->ReleaseValue(input);
  }
  report("whisper_used");
  ort->ReleaseSession(encoder);
  ort->ReleaseSession(decoder);
  ort->ReleaseSessionOptions(options);
  ort->ReleaseMemoryInfo(memory);
  ort->ReleaseEnv(env);
  malloc_trim(0);
  report("whisper_unloaded");
  return 0;
}
