#ifndef EARSHOT_CPOCKETSPHINX_SHIM_H
#define EARSHOT_CPOCKETSPHINX_SHIM_H
#include <pocketsphinx.h>
/* No shims: the decoder config is built with cmd_ln_parse_r (argv form), never the variadic
   cmd_ln_init. */
#endif
