#ifndef EARSHOT_CCURL_SHIM_H
#define EARSHOT_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per argument kind. */
static inline CURLcode CCurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_write(CURL *h, CURLoption o, curl_write_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_setopt_xferinfo(CURL *h, CURLoption o, curl_xferinfo_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode CCurl_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode CCurl_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
/* CURLVERSION_NOW is a macro Swift cannot see. */
static inline curl_version_info_data *CCurl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }
#endif
