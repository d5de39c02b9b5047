#ifndef EARSHOT_CPOCKETSPHINX_SHIM_H
#define EARSHOT_CPOCKETSPHINX_SHIM_H
#include <pocketsphinx.h>
/* err_set_logfp: PocketSphinxDecoder silences sphinxbase logging once per process with
   err_set_logfp(NULL) instead of -logfn (which fopen()s a new global log FILE and fclose()s the
   previous one on every ps_init, racing with decoders logging on other threads). */
#include <sphinxbase/err.h>
/* ckd_free: releases the strings ps_lookup_word returns. */
#include <sphinxbase/ckd_alloc.h>
/* No shims: the decoder config is built with cmd_ln_parse_r (argv form), never the variadic
   cmd_ln_init. */
#endif
