/* ops/norm_backward.c — placeholder kernel table (being written). */
#include "ops_internal.h"
const mft__kernel_def mft__kernels_norm_backward[] = {{.fn = NULL}};
