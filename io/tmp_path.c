/* io/tmp_path.c — the temporary name a save writes to before renaming it
 * into place (io/io_internal.h), shared by the checkpoint and .npy writers. */
#include <string.h>
#include <sys/stat.h>
#include "internal.h"
#include "io_internal.h"

char *mft__io_tmp_path(const char *fn, const char *path) {
    const size_t n = strlen(path);
    char *tmp = mft__alloc_or_err(fn, n + 5, 1);
    if (!tmp) return NULL;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    /* the rename replaces what path names: only ever a regular file (a device
     * node, FIFO or directory there is the caller's mistake, not something to
     * swap out); "<path>.tmp" likewise, which fopen would follow */
    const char *const names[2] = {path, tmp};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        if (stat(names[i], &sb) == 0 && !S_ISREG(sb.st_mode)) {
            mft__set_error(MFT_ERR_IO, "%s: '%s' exists and is not a regular file; not replaced",
                           fn, names[i]);
            mft__free(tmp);
            return NULL;
        }
    }
    return tmp;
}
