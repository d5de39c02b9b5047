#ifndef EARSHOT_CSHERPAONNX_SHIM_H
#define EARSHOT_CSHERPAONNX_SHIM_H
#include <stdint.h>
#include <sherpa-onnx/c-api/c-api.h>

#endif
