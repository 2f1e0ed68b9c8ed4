/* ops/conv.c — placeholder kernel table (being written). */
#include "ops_internal.h"
const mft__kernel_def mft__kernels_conv[] = {{.fn = NULL}};
