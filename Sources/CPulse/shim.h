#ifndef EARSHOT_CPULSE_SHIM_H
#define EARSHOT_CPULSE_SHIM_H
/* The simple API records; the asynchronous one (context, introspection) lists the sources. */
#include <dlfcn.h>
#include <stdio.h>
#include <pulse/simple.h>
#include <pulse/error.h>
#include <pulse/pulseaudio.h>

// libpulse is opened with dlopen when a client first records or lists sources, not linked:
// linked, it and what it needs (libpulsecommon, D-Bus, X11/xcb, libsystemd, libgcrypt, …: 19
// libraries) were loaded and relocated at the start of every client process, ~2.6 ms, for the
// few that use a microphone. The entry points Earshot calls, typed from libpulse's declarations.
#define EARSHOT_PULSE_FUNCTIONS(X) \
    X(simple, pa_simple_new) X(simple, pa_simple_read) X(simple, pa_simple_free) \
    X(pulse, pa_strerror) X(pulse, pa_mainloop_new) X(pulse, pa_mainloop_free) X(pulse, pa_mainloop_get_api) \
    X(pulse, pa_mainloop_prepare) X(pulse, pa_mainloop_poll) X(pulse, pa_mainloop_dispatch) \
    X(pulse, pa_context_new) X(pulse, pa_context_unref) X(pulse, pa_context_connect) X(pulse, pa_context_disconnect) \
    X(pulse, pa_context_get_state) X(pulse, pa_context_errno) X(pulse, pa_context_get_server_info) \
    X(pulse, pa_context_get_source_info_list) X(pulse, pa_operation_get_state) X(pulse, pa_operation_unref)

/// libpulse's entry points, filled by earshot_pulse_load.
typedef struct earshot_pulse {
#define EARSHOT_PULSE_FIELD(library, name) __typeof__(name) *_Nonnull name;
    EARSHOT_PULSE_FUNCTIONS(EARSHOT_PULSE_FIELD)
#undef EARSHOT_PULSE_FIELD
} earshot_pulse;

/// Opens libpulse-simple and libpulse (soname version 0) and fills `api`. Returns 0, or -1 with
/// what failed (dlerror's text) in `reason`. Call once; the libraries stay loaded.
static inline int earshot_pulse_load(earshot_pulse *_Nonnull api, char *_Nonnull reason, size_t size) {
    void *simple = dlopen("libpulse-simple.so.0", RTLD_NOW | RTLD_LOCAL);
    void *pulse = simple ? dlopen("libpulse.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!pulse) {
        const char *error = dlerror();
        snprintf(reason, size, "%s", error ? error : "libpulse cannot be opened");
        return -1;
    }
#define EARSHOT_PULSE_RESOLVE(library, name) \
    api->name = (__typeof__(name) *)dlsym(library, #name); \
    if (!api->name) { snprintf(reason, size, "libpulse has no %s", #name); return -1; }
    EARSHOT_PULSE_FUNCTIONS(EARSHOT_PULSE_RESOLVE)
#undef EARSHOT_PULSE_RESOLVE
    return 0;
}
#endif
