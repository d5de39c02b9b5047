#ifndef EARSHOT_CSHERPAONNX_SHIM_H
#define EARSHOT_CSHERPAONNX_SHIM_H
#include <stdint.h>
#include <sherpa-onnx/c-api/c-api.h>

/* onnxruntime ships no header in the sherpa-onnx-core wheel. Its C ABI entry point returns a
   struct whose first two members are stable across versions; that is all we read (the runtime
   version for `earshotd --version`). */
typedef struct CSherpaOnnx_OrtApiBase {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} CSherpaOnnx_OrtApiBase;
const CSherpaOnnx_OrtApiBase *OrtGetApiBase(void);
#endif
