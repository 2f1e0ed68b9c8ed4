/* tests/fuzz/replay.c — main() of the fuzz_replay_<target> executables: feeds the
 * empty input, then every file named on the command line (directories: every
 * regular file in them, in name order, dot files skipped) to the target's
 * LLVMFuzzerTestOneInput, so committed corpora and reproducers run in any build
 * without libFuzzer. An invariant failure traps inside the target; the name of
 * the input is printed just before it runs. Exit status 0 when every input
 * passed, 2 on usage errors (no inputs found, unreadable file). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path, int verbose) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open '%s': %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "replay: cannot read '%s'\n", path);
        free(buf);
        return -1;
    }
    /* an exactly-sized copy, so reads past the input are caught under ASan */
    uint8_t *data = malloc(n ? n : 1);
    if (!data) {
        free(buf);
        return -1;
    }
    memcpy(data, buf, n);
    free(buf);
    if (verbose) fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

static int skip_dots(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
    int verbose = 1, files = 0, bad = 0;
    if (argc > 1 && strcmp(argv[1], "-q") == 0) {
        verbose = 0;
        argv++;
        argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s [-q] FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: '%s': %s\n", argv[i], strerror(errno));
            bad++;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (run_file(argv[i], verbose) != 0) bad++;
            else files++;
            continue;
        }
        struct dirent **list = NULL;
        int k = scandir(argv[i], &list, skip_dots, alphasort);
        if (k < 0) {
            fprintf(stderr, "replay: cannot list '%s': %s\n", argv[i], strerror(errno));
            bad++;
            continue;
        }
        for (int j = 0; j < k; j++) {
            size_t len = strlen(argv[i]) + strlen(list[j]->d_name) + 2;
            char *p = malloc(len);
            if (p) {
                snprintf(p, len, "%s/%s", argv[i], list[j]->d_name);
                struct stat fs;
                if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode)) {
                    if (run_file(p, verbose) != 0) bad++;
                    else files++;
                }
            }
            free(p);
            free(list[j]);
        }
        free(list);
    }
    printf("replayed %d inputs%s\n", files, bad ? " (with errors)" : "");
    if (bad || files == 0) {
        fprintf(stderr, "replay: %s\n", bad ? "some inputs could not be read" : "no inputs found");
        return 2;
    }
    return 0;
}
