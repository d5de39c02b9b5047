#ifndef EARSHOT_CZLIB_SHIM_H
#define EARSHOT_CZLIB_SHIM_H
/* zlib: the compression ratio by which a Whisper decode detects repetition, as OpenAI measures it. */
#include <zlib.h>
#endif
