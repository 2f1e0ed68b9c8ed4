/* tensor/text.c — bounded text building: appending printf-formatted pieces
 * to a caller's buffer the way snprintf fills one (the text is cut at the
 * buffer's end and always terminated, while the position counts the whole
 * text, so a caller learns the size it needs). Every describe / explain /
 * markdown function of the library builds its text with it. */
#include <stdio.h>
#include "internal.h"

void mft__text_printf(mft__text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const bool room = t->buf && t->pos < t->len;
    const int n = vsnprintf(room ? t->buf + t->pos : NULL, room ? t->len - t->pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0) t->pos += (size_t)n;
}
