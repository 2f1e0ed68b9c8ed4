/* tools/explain_safetensors.c — `mft-explain --safetensors FILE --name T`:
 * the library's description of one tensor of a safetensors file
 * (mft_safetensors_describe: the file entry, its mft metadata, the save mode,
 * what loading makes of it and where its tag comes from, "restored from
 * metadata" or "inferred from the file's strides"), then the tensor itself as
 * mft_safetensors_load returns it, for mft-explain.c's analysis and picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "explain.h"

mft_tensor *explain_safetensors(const char *path, const char *name) {
    size_t need = mft_safetensors_describe(path, name, NULL, 0);
    if (need == 0) explain_lib_error("mft_safetensors_describe");
    char *text = malloc(need + 1);
    if (!text) {
        fprintf(stderr, "mft-explain: out of memory\n");
        exit(1);
    }
    mft_safetensors_describe(path, name, text, need + 1);
    fputs(text, stdout);
    free(text);
    int n = 0;
    char **names = NULL;
    mft_tensor **ts = NULL;
    if (mft_safetensors_load(path, 0, &n, &names, &ts) != MFT_OK)
        explain_lib_error("mft_safetensors_load");
    mft_tensor *t = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) t = mft_tensor_retain(ts[i]);
    mft_safetensors_free_list(n, names, ts);
    return t; /* described above, so present */
}
