#ifndef EARSHOT_CSYSTEMD_SHIM_H
#define EARSHOT_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
/* No shims: sd_journal_sendv (iovec form) replaces the variadic sd_journal_send. */
#endif
