/* mft/cnn.h — the CNN operators, one header per family, all dispatched by
 * (op, format, dtype) through mft/dispatch.h (except cat/stack/split and
 * dropout, built on copies, views and elementwise loops). Output formats
 * follow docs/spec.md §4, input gradients docs/spec.md §5. Ownership and NULL propagation
 * as in mft/tensor.h. */
#ifndef MFT_CNN_H
#define MFT_CNN_H

#include "mft/conv.h"
#include "mft/linalg.h"
#include "mft/norm.h"
#include "mft/pool.h"
#include "mft/resize.h"
#include "mft/shape.h"
#include "mft/softmax.h"

#endif
