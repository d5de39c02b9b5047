#ifndef EARSHOT_CSQLITE_SHIM_H
#define EARSHOT_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which does not import. */
static inline sqlite3_destructor_type CSQLite_transient(void) { return SQLITE_TRANSIENT; }
#endif
