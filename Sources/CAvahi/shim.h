#ifndef EARSHOT_CAVAHI_SHIM_H
#define EARSHOT_CAVAHI_SHIM_H
#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/thread-watch.h>
/* No shims: avahi_entry_group_add_service_strlst replaces the variadic avahi_entry_group_add_service. */
#endif
