#ifndef EARSHOT_CFFTW_SHIM_H
#define EARSHOT_CFFTW_SHIM_H
/* FFTW 3, single precision: the Whisper decoder's short-time Fourier transform. */
#include <fftw3.h>
#endif
