#ifndef EARSHOT_CONNXRUNTIME_SHIM_H
#define EARSHOT_CONNXRUNTIME_SHIM_H
/* ONNX Runtime's C API. The header is Debian trixie's libonnxruntime-dev, unpacked by
   Scripts/setup.sh into .deps/ of this tree; the library is the sherpa-onnx-core wheel's
   libonnxruntime.so in /usr/local/lib (a newer release: the API is versioned, append-only). */
#include "../../.deps/onnxruntime-dev/usr/include/onnxruntime/onnxruntime_c_api.h"
#endif
