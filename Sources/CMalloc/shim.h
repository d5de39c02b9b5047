#ifndef EARSHOT_CMALLOC_SHIM_H
#define EARSHOT_CMALLOC_SHIM_H
/* glibc's allocator controls (malloc_trim), which Swift's Glibc module does not export. */
#include <malloc.h>
#endif
