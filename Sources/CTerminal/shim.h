#ifndef EARSHOT_CTERMINAL_SHIM_H
#define EARSHOT_CTERMINAL_SHIM_H
/* libc's wcwidth (columns a character takes on a terminal), which Swift's Glibc module does not
   export, asked in the C.UTF-8 locale for this thread only: the process's locale may be "C", where
   glibc knows the width of no character beyond ASCII, and a library must not change it. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <locale.h>
#include <wchar.h>

static inline int earshot_wcwidth(unsigned int scalar) {
    static locale_t utf8 = (locale_t)0;
    if (utf8 == (locale_t)0) utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (utf8 == (locale_t)0) return wcwidth((wchar_t)scalar);
    locale_t previous = uselocale(utf8);
    int width = wcwidth((wchar_t)scalar);
    uselocale(previous);
    return width;
}
#endif
