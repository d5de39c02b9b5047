/* A cache in front of libm's sincos for the engine process.
 *
 * sherpa-onnx's Whisper front end (kaldi-native-fbank's WhisperFeatureComputer, linked into
 * libsherpa-onnx-c-api.so) computes each 400-sample frame's spectrum with a recursive FFT that
 * calls sin and cos for every twiddle factor and ends in 25-point DFTs of 625 sin/cos pairs each:
 * ~10 000 sincos calls a frame, 19 ms of CPU per second of audio on a 2-core AVX2 machine, more
 * than a tiny.en decode's encoder. The arguments repeat: fewer than a thousand distinct angles.
 *
 * Defining `sincos` in the executable interposes it for every shared library's PLT call (ELF
 * symbol lookup starts at the executable). Each distinct finite argument is computed once by
 * libm's sincos, found with dlsym(RTLD_NEXT), and answered from a fixed table afterwards, so the
 * results are libm's bit for bit. The table is lock-free: a slot is claimed by a compare-exchange,
 * filled, then published with a release store; readers use it only after an acquire load shows
 * it ready. When the probed slots are taken the call goes to libm. Non-finite arguments always go
 * to libm (errno and the exception flags stay its own).
 */
#define _GNU_SOURCE
#include "sincos_cache.h"

#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

enum { SLOT_BITS = 12, SLOTS = 1 << SLOT_BITS, PROBES = 8 };
enum { EMPTY = 0, FILLING = 1, READY = 2 };

struct slot {
  _Atomic uint32_t state;
  uint64_t key;
  double sine;
  double cosine;
};

static struct slot slots[SLOTS];
static _Atomic size_t filled;

typedef void (*sincos_fn)(double, double *, double *);
static _Atomic(sincos_fn) libm_sincos;

/* Used only if the dynamic linker cannot name libm's sincos; taking the addresses keeps the
   compiler from fusing the two calls back into a call to `sincos`, that is, to this file. */
static double (*volatile libm_sin)(double) = sin;
static double (*volatile libm_cos)(double) = cos;

static void separate_sincos(double x, double *sine, double *cosine) {
  *sine = libm_sin(x);
  *cosine = libm_cos(x);
}

static sincos_fn resolve(void) {
  sincos_fn fn = atomic_load_explicit(&libm_sincos, memory_order_acquire);
  if (fn == NULL) {
    fn = (sincos_fn)dlsym(RTLD_NEXT, "sincos");
    if (fn == NULL || fn == sincos) fn = separate_sincos;
    atomic_store_explicit(&libm_sincos, fn, memory_order_release);
  }
  return fn;
}

void earshot_sincos_uncached(double x, double *sine, double *cosine) { resolve()(x, sine, cosine); }

void sincos(double x, double *sine, double *cosine) {
  if (!isfinite(x)) {
    resolve()(x, sine, cosine);
    return;
  }
  uint64_t key;
  memcpy(&key, &x, sizeof key);
  uint64_t home = (key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - SLOT_BITS);
  for (uint64_t probe = 0; probe < PROBES; ++probe) {
    struct slot *s = &slots[(home + probe) & (SLOTS - 1)];
    uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
    if (state == READY) {
      if (s->key == key) {
        *sine = s->sine;
        *cosine = s->cosine;
        return;
      }
      continue;
    }
    if (state == EMPTY) {
      uint32_t expected = EMPTY;
      if (atomic_compare_exchange_strong_explicit(&s->state, &expected, FILLING, memory_order_acquire,
                                                  memory_order_relaxed)) {
        resolve()(x, &s->sine, &s->cosine);
        s->key = key;
        *sine = s->sine;
        *cosine = s->cosine;
        atomic_store_explicit(&s->state, READY, memory_order_release);
        atomic_fetch_add_explicit(&filled, 1, memory_order_relaxed);
        return;
      }
    }
    /* FILLING, or another thread claimed it first: try the next slot. */
  }
  resolve()(x, sine, cosine);
}

void *earshot_sincos_cache_function(void) { return (void *)sincos; }

size_t earshot_sincos_cache_count(void) { return atomic_load_explicit(&filled, memory_order_relaxed); }

size_t earshot_sincos_cache_capacity(void) { return SLOTS; }
