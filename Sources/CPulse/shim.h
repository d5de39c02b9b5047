#ifndef EARSHOT_CPULSE_SHIM_H
#define EARSHOT_CPULSE_SHIM_H
/* The simple API records; the asynchronous one (context, introspection) lists the sources. */
#include <pulse/simple.h>
#include <pulse/error.h>
#include <pulse/pulseaudio.h>
#endif
