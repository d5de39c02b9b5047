#ifndef EARSHOT_CPULSE_SHIM_H
#define EARSHOT_CPULSE_SHIM_H
#include <pulse/simple.h>
#include <pulse/error.h>
#endif
