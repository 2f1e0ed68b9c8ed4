/* ops/conv_fast.c — placeholder kernel table (being written). */
#include "ops_internal.h"
const mft__kernel_def mft__kernels_conv_fast[] = {{.fn = NULL}};
