#ifndef EARSHOT_CARCHIVE_SHIM_H
#define EARSHOT_CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#endif
