#ifndef EARSHOT_CSOXR_SHIM_H
#define EARSHOT_CSOXR_SHIM_H
#include <soxr.h>
#endif
