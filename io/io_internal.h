/* io/io_internal.h — what the file formats of io/ share (checkpoint.c,
 * npy.c): the "<path>.tmp" a save writes before it renames the file into
 * place. Private to the io layer. */
#ifndef MFT_IO_INTERNAL_H
#define MFT_IO_INTERNAL_H

/* "<path>.tmp" (mft__alloc'd; mft__free it), or NULL with the error set
 * naming fn: MFT_ERR_IO when path or "<path>.tmp" exists and is not a
 * regular file (the rename would replace a device, FIFO or directory, and
 * fopen would follow one), MFT_ERR_NOMEM. */
char *mft__io_tmp_path(const char *fn, const char *path);

#endif
