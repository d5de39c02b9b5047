#ifndef EARSHOT_CFFMPEG_SHIM_H
#define EARSHOT_CFFMPEG_SHIM_H
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswresample/swresample.h>
#include <libavutil/channel_layout.h>
#include <libavutil/log.h>

// Macros Swift cannot import.
static inline int earshot_averror_eof(void) { return AVERROR_EOF; }
static inline int earshot_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline void earshot_av_log_errors_only(void) { av_log_set_level(AV_LOG_QUIET); }
#endif
