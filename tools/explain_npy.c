/* tools/explain_npy.c — mft-explain --npy FILE [--as FMT]: what the .npy file
 * says about itself (format version, the header dict as written, where the
 * data starts), printed before the analysis of the tensor mft_load_npy makes
 * of it (docs/tools.md, docs/interop.md). Only the preamble is read here, to
 * show the header; the file is validated and loaded by the library. */
#include <stdio.h>
#include <string.h>
#include "explain.h"

void explain_npy_header(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char pre[12];
    if (!f) return; /* mft_load_npy reports it */
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 ||
        pre[6] > 3) {
        fclose(f);
        return;
    }
    const int lenbytes = pre[6] == 1 ? 2 : 4;
    if (lenbytes == 4 && fread(pre + 10, 1, 2, f) != 2) {
        fclose(f);
        return;
    }
    unsigned long hlen = 0;
    for (int i = lenbytes - 1; i >= 0; i--) hlen = hlen << 8 | pre[8 + i];
    char header[200];
    size_t n = fread(header, 1, sizeof header - 1, f);
    fclose(f);
    if (n > hlen) n = hlen;
    while (n > 0 && (header[n - 1] == ' ' || header[n - 1] == '\n')) n--;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)header[i] < 0x20 || (unsigned char)header[i] > 0x7e) header[i] = '?';
    header[n] = '\0';
    printf("# file %s: .npy format %d.%d, header %s%s\n", path, pre[6], pre[7], header,
           n + 1 >= sizeof header - 1 ? "..." : "");
    printf("#   data at byte %lu (%s)\n", 8ul + (unsigned long)lenbytes + hlen,
           (8ul + (unsigned long)lenbytes + hlen) % 64 ? "not a multiple of 64" : "a multiple of 64");
}
