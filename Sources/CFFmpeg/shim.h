#ifndef EARSHOT_CFFMPEG_SHIM_H
#define EARSHOT_CFFMPEG_SHIM_H
#include <dlfcn.h>
#include <stdio.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswresample/swresample.h>
#include <libavutil/channel_layout.h>
#include <libavutil/log.h>

// Macros Swift cannot import.
static inline int earshot_averror_eof(void) { return AVERROR_EOF; }
static inline int earshot_averror_eagain(void) { return AVERROR(EAGAIN); }

// FFmpeg is opened with dlopen when a file first needs it, not linked: linked, its ~270 shared
// libraries (every codec's) were loaded and relocated at the start of every client process,
// ~60 ms before main. The entry points the reader calls, typed from FFmpeg's own declarations.
#define EARSHOT_FFMPEG_FUNCTIONS(X) \
    X(avformat, avformat_open_input) X(avformat, avformat_find_stream_info) X(avformat, av_find_best_stream) \
    X(avformat, av_read_frame) X(avformat, avformat_close_input) \
    X(avcodec, avcodec_alloc_context3) X(avcodec, avcodec_parameters_to_context) X(avcodec, avcodec_open2) \
    X(avcodec, avcodec_send_packet) X(avcodec, avcodec_receive_frame) X(avcodec, avcodec_free_context) \
    X(avcodec, av_packet_alloc) X(avcodec, av_packet_unref) X(avcodec, av_packet_free) \
    X(swresample, swr_alloc_set_opts2) X(swresample, swr_init) X(swresample, swr_get_out_samples) \
    X(swresample, swr_convert) X(swresample, swr_free) \
    X(avutil, av_frame_alloc) X(avutil, av_frame_unref) X(avutil, av_frame_free) X(avutil, av_strerror) \
    X(avutil, av_log_set_level)

/// FFmpeg's entry points, filled by earshot_ffmpeg_load.
typedef struct earshot_ffmpeg {
#define EARSHOT_FFMPEG_FIELD(library, name) __typeof__(name) *_Nonnull name;
    EARSHOT_FFMPEG_FUNCTIONS(EARSHOT_FFMPEG_FIELD)
#undef EARSHOT_FFMPEG_FIELD
} earshot_ffmpeg;

/// Opens the FFmpeg libraries of the major versions these headers declare and fills `api`.
/// Returns 0, or -1 with what failed (dlerror's text) in `reason`. Call once; the libraries stay
/// loaded.
static inline int earshot_ffmpeg_load(earshot_ffmpeg *_Nonnull api, char *_Nonnull reason, size_t size) {
    void *avformat = dlopen("libavformat.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
    void *avcodec = avformat ? dlopen("libavcodec.so." AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL) : NULL;
    void *swresample = avcodec ? dlopen("libswresample.so." AV_STRINGIFY(LIBSWRESAMPLE_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL) : NULL;
    void *avutil = swresample ? dlopen("libavutil.so." AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!avutil) {
        const char *error = dlerror();
        snprintf(reason, size, "%s", error ? error : "an FFmpeg library cannot be opened");
        return -1;
    }
#define EARSHOT_FFMPEG_RESOLVE(library, name) \
    api->name = (__typeof__(name) *)dlsym(library, #name); \
    if (!api->name) { snprintf(reason, size, "FFmpeg's lib%s has no %s", #library, #name); return -1; }
    EARSHOT_FFMPEG_FUNCTIONS(EARSHOT_FFMPEG_RESOLVE)
#undef EARSHOT_FFMPEG_RESOLVE
    return 0;
}
#endif
