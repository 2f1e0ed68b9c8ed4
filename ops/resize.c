/* ops/resize.c — placeholder kernel table (being written). */
#include "ops_internal.h"
const mft__kernel_def mft__kernels_resize[] = {{.fn = NULL}};
