/* ops/pool_more.c — placeholder kernel table (being written). */
#include "ops_internal.h"
const mft__kernel_def mft__kernels_pool_more[] = {{.fn = NULL}};
