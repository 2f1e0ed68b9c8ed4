/* io/safetensors_internal.h — what the safetensors reader and writer share
 * (io/safetensors_header.c parses and verifies a file's header,
 * io/safetensors_load.c makes tensors from it, io/safetensors_save.c writes
 * files): the dtype table, the parsed entry and file, and the physical
 * shape of a oneDNN-tagged blocked layout. docs/spec.md §8.3. */
#ifndef MFT_IO_SAFETENSORS_INTERNAL_H
#define MFT_IO_SAFETENSORS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "internal.h"
#include "json.h"

/* Most dims a file entry may have: a logical tensor's plus one per block. */
#define ST_MAX_FILE_DIMS (MFT_MAX_DIMS + MFT_MAX_BLOCKS)

/* The safetensors name of an mft dtype ("F32"). */
const char *mft__st_dtype_name(mft_dtype dt);

/* A read-only file mapping shared by the tensors viewing it: unmapped when
 * the last reference goes (the loader's own, then one per storage). */
typedef struct mft__st_map {
    atomic_long refs;
    void *base;
    size_t len;
} mft__st_map;
void mft__st_map_release(mft__st_map *m);

typedef enum st_layout_kind { ST_LAYOUT_NONE, ST_LAYOUT_PERM, ST_LAYOUT_ONEDNN } st_layout_kind;

typedef struct mft__st_entry {
    const char *name; /* decoded, NUL-terminated (in the JSON document) */
    size_t name_len;
    mft_dtype dtype;
    int fndim;                         /* the file's shape */
    int64_t fshape[ST_MAX_FILE_DIMS];
    int64_t fnumel;
    uint64_t begin, end;               /* data_offsets, relative to the data buffer */
    /* mft metadata */
    bool has_format;
    mft_format format;                 /* "mft.format.<name>" */
    st_layout_kind layout_kind;        /* "mft.layout.<name>" */
    const char *layout_text;           /* its value (NULL when absent) */
    const char *format_text;
    /* the tensor mft makes: logical sizes; strides (plain) or layout (blocked) */
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t strides[MFT_MAX_DIMS];
    mft_layout layout;                 /* ST_LAYOUT_ONEDNN */
} mft__st_entry;

typedef struct mft__st_file {
    const char *path;
    int fd;                 /* open while the file is in use, else -1 */
    uint64_t size;          /* file size */
    uint64_t hlen;          /* N: JSON header bytes */
    uint64_t data_start;    /* 8 + N */
    unsigned char *header;  /* the N header bytes (owned copy in READ mode, or in the map) */
    bool header_owned;
    mft__st_map *map;       /* the whole file mapped (default mode), else NULL */
    mft__json_doc doc;
    mft__st_entry *entries; /* in header order */
    size_t count;
    struct mft__st_name *sorted; /* entry names sorted, for lookups */
    size_t nmeta;           /* __metadata__ entries */
    const mft__json_node *metadata; /* the __metadata__ object, NULL when absent */
} mft__st_file;

/* Opens, maps (or reads the header of, with MFT_SAFETENSORS_READ) and
 * verifies the whole header of path (docs/spec.md §8.3): on MFT_OK every
 * entry is valid and its tensor geometry known. Errors name fn and path.
 * Always call mft__st_close, success or not. */
mft_status mft__st_open(const char *fn, const char *path, unsigned flags, mft__st_file *f);
void mft__st_close(mft__st_file *f);
/* Index of the entry named name, -1 when none. */
long mft__st_find(const mft__st_file *f, const char *name);

/* Whether entry e becomes a view of f's mapping (mapped, non-empty, its
 * bytes aligned to its element size). */
bool mft__st_zero_copy(const mft__st_file *f, const mft__st_entry *e);
/* The entry's tensor in the file's own layout (no tag restored): a view of
 * the mapping or owned memory filled from the file (pad lanes checked). Not
 * registered in any scope (callers suspend). NULL with the error naming fn. */
mft_tensor *mft__st_make(const char *fn, mft__st_file *f, const mft__st_entry *e);
/* The tag: restored from "mft.format" (a reorder when the bytes are not laid
 * out in that format), else from the descriptor of a oneDNN layout, else
 * inferred from the strides, with that provenance recorded. Takes t;
 * returns the result (t or its copy), NULL with the error naming fn. */
mft_tensor *mft__st_restore(const char *fn, const mft__st_entry *e, mft_tensor *t);

/* The physical (file) shape of a packed blocked layout: its outer dims in
 * the order of its canonical oneDNN tag (extent padded / block), then its
 * inner blocks. Writes the canonical tag into tag (tag_len bytes). Returns
 * the rank, or -1 (with an error naming fn) when the layout has no oneDNN
 * tag or the tag does not fit. */
int mft__st_blocked_shape(const char *fn, const mft_layout *l, int64_t *shape, char *tag,
                          size_t tag_len);

#endif
