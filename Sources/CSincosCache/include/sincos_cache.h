#ifndef EARSHOT_SINCOS_CACHE_H
#define EARSHOT_SINCOS_CACHE_H
#include <stddef.h>

/* The engine process defines `sincos` itself (sincos_cache.c), so the shared libraries it loads
   call this cache instead of libm's. Values are libm's own, bit for bit. */

/* The `sincos` calls in this process resolve to (the cache, when linked into the executable). */
void *earshot_sincos_cache_function(void);

/* Distinct finite arguments cached so far (at most earshot_sincos_cache_capacity()). */
size_t earshot_sincos_cache_count(void);

/* Slots in the cache. */
size_t earshot_sincos_cache_capacity(void);

/* libm's sincos, bypassing the cache. */
void earshot_sincos_uncached(double x, double *sine, double *cosine);

#endif
