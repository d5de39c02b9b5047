#ifndef EARSHOT_CESPEAKNG_SHIM_H
#define EARSHOT_CESPEAKNG_SHIM_H
/* espeak-ng's phoneme translation (espeak_TextToPhonemes): pronunciations for contextual words
   the PocketSphinx dictionary lacks. No synthesis and no audio output are used. */
#include <espeak-ng/speak_lib.h>
#endif
