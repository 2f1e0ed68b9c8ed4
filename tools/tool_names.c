/* tools/tool_names.c — the "did you mean" list of the command-line tools:
 * registry op names (mft_op_at) ranked by closeness to a name the registry
 * does not have (see tool_names.h). */
#include "tool_names.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <mft/mft.h>

#define NAMES_MAX_LEN 64 /* longer queries are cut: no op name comes close */
#define NAMES_MAX_OUT 8

/* Lower-cased copy of s without "mft_" in front and "_out" / "_" behind. */
static void names_normalise(const char *s, char *out, size_t len) {
    if (!strncmp(s, "mft_", 4) || !strncmp(s, "MFT_", 4)) s += 4;
    size_t n = 0;
    for (; s[n] && n + 1 < len; n++) out[n] = (char)tolower((unsigned char)s[n]);
    out[n] = '\0';
    if (n > 4 && !strcmp(out + n - 4, "_out"))
        out[n - 4] = '\0';
    else if (n > 1 && out[n - 1] == '_')
        out[n - 1] = '\0';
}

/* Levenshtein distance of a and b (both shorter than NAMES_MAX_LEN). */
static int names_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    int row[NAMES_MAX_LEN + 1];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

int tool_close_op_names(const char *query, char *buf, size_t len) {
    if (len) buf[0] = '\0';
    if (!query) return 0;
    char q[NAMES_MAX_LEN];
    names_normalise(query, q, sizeof q);
    /* score: 0 = substring either way, 1 + distance otherwise; -1 = not close */
    struct {
        const char *name;
        int score;
    } best[NAMES_MAX_OUT];
    int nbest = 0;
    int limit = (int)strlen(q) / 3;
    if (limit < 2) limit = 2;
    for (int k = 0; k < mft_op_count(); k++) {
        const char *name = mft_op_at(k)->name;
        if (strlen(name) >= NAMES_MAX_LEN) continue;
        int score = -1;
        if (q[0] && (strstr(name, q) || strstr(q, name)))
            score = 0;
        else {
            int d = names_distance(q, name);
            if (d <= limit) score = 1 + d;
        }
        if (score < 0) continue;
        /* insert, keeping best[] sorted by score then registry order */
        int at = nbest;
        while (at > 0 && best[at - 1].score > score) at--;
        if (at >= NAMES_MAX_OUT) continue;
        int last = nbest < NAMES_MAX_OUT ? nbest : NAMES_MAX_OUT - 1;
        for (int i = last; i > at; i--) best[i] = best[i - 1];
        best[at].name = name;
        best[at].score = score;
        if (nbest < NAMES_MAX_OUT) nbest++;
    }
    size_t pos = 0;
    for (int i = 0; i < nbest; i++) {
        int w = snprintf(pos < len ? buf + pos : NULL, pos < len ? len - pos : 0, "%s%s",
                         i ? " " : "", best[i].name);
        if (w > 0) pos += (size_t)w;
    }
    return nbest;
}
