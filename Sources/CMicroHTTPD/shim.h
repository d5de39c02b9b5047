#ifndef EARSHOT_CMICROHTTPD_SHIM_H
#define EARSHOT_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* libmicrohttpd's start and connection-info calls are variadic, which Swift cannot call; these
   fixed-signature wrappers pass exactly the options EarshotHTTP uses. */

/* A daemon fed by the caller's own accept loop (MHD_add_connection) instead of a listening
   socket, one thread per connection (so a handler may wait for its answer without holding anyone
   else up), at most `connection_limit` connections, `timeout_seconds` of inactivity before a
   connection is closed, `memory_limit` bytes of read/write buffer per connection, so that connections are admitted per peer before any thread is spent on them;
   `notify` hears when each connection starts and closes (MHD calls it before closing the socket). */
static inline struct MHD_Daemon *earshot_mhd_start_fed(unsigned int connection_limit,
                                                       unsigned int timeout_seconds, size_t memory_limit,
                                                       MHD_AccessHandlerCallback handler, void *handler_cls,
                                                       MHD_RequestCompletedCallback completed, void *completed_cls,
                                                       MHD_NotifyConnectionCallback notify, void *notify_cls) {
    return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC
                                | MHD_USE_NO_LISTEN_SOCKET,
                            0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_END);
}

/* The connection's socket (for SO_PEERCRED on a Unix socket), or -1. */
static inline int earshot_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

/* Macros and closed enums Swift imports awkwardly. */
static const enum MHD_Result earshot_mhd_yes = MHD_YES;
static const enum MHD_Result earshot_mhd_no = MHD_NO;
static const enum MHD_ResponseMemoryMode earshot_mhd_must_copy = MHD_RESPMEM_MUST_COPY;
static const enum MHD_ValueKind earshot_mhd_header_kind = MHD_HEADER_KIND;
static const enum MHD_ValueKind earshot_mhd_argument_kind = MHD_GET_ARGUMENT_KIND;
static const enum MHD_ConnectionNotificationCode earshot_mhd_notify_closed = MHD_CONNECTION_NOTIFY_CLOSED;
/* poll(2)'s peer-closed event (a GNU extension <poll.h> hides without _GNU_SOURCE). */
static const short earshot_pollrdhup = 0x2000;
static const uint64_t earshot_mhd_size_unknown = MHD_SIZE_UNKNOWN;
static const ssize_t earshot_mhd_reader_end = MHD_CONTENT_READER_END_OF_STREAM;
static const ssize_t earshot_mhd_reader_error = MHD_CONTENT_READER_END_WITH_ERROR;
#endif
