/* tools/tool_names.h — op-name lookup shared by the command-line tools
 * (mft-rules, mft-explain): when a name is not an op of the registry
 * (mft/registry.h), the names a user most likely meant. */
#ifndef MFT_TOOL_NAMES_H
#define MFT_TOOL_NAMES_H

#include <stddef.h>

/* Writes into buf (always NUL-terminated when len > 0) up to 8 registry op
 * names close to `query`, separated by single spaces, best first: names that
 * contain the query or are contained in it, then names within a small edit
 * distance (about a third of the query's length, at least 2). Case is
 * ignored, and a leading "mft_" or a trailing "_" / "_out" (the in-place and
 * out forms) is dropped from the query first. Empty when nothing is close.
 * Returns the number of names written. */
int tool_close_op_names(const char *query, char *buf, size_t len);

#endif
