/* ops/norm/norm_internal.h — what the files of the normalisation family
 * share beyond ops/ops_internal.h: the layer_norm NHWC permutation walks. */
#ifndef MFT_OPS_NORM_INTERNAL_H
#define MFT_OPS_NORM_INTERNAL_H

#include "ops_internal.h"

/* The layer_norm permutation of an NHWC block (ops/norm/norm.c,
 * ops/norm/norm_backward.c): for n < Nb, c < C, s < Sp, physical position
 * P = (n*Sp + s)*C + c holds logical element Q = (n*C + c)*Sp + s (a C x Sp
 * transpose per n). They replace an index array of L int64 that each call
 * filled and read.
 * MFT__LN_PERM_FOR runs BODY for every (P, Q) in P order, Q stepped (C
 * lines of the logical side in use, each reused for 16 s): for gathering
 * the weight into the physical order (a tiled walk measured slower there,
 * 1.31-1.46 against 1.07-1.14 ms for the 8x64x56x56 forward).
 * MFT__LN_PERM_TILED runs it in 32 x 32 tiles of (c, s), P consecutive
 * inside: for scattering the double gradients back to the logical order
 * (2.24-2.58 against 2.85-3.25 ms for the backward in P order). */
#define MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, BODY)                                                    \
    for (int64_t ln_n_ = 0, P = 0; ln_n_ < (Nb); ln_n_++)                                          \
        for (int64_t ln_s_ = 0; ln_s_ < (Sp); ln_s_++)                                             \
            for (int64_t ln_c_ = 0, Q = ln_n_ * (C) * (Sp) + ln_s_; ln_c_ < (C);                   \
                 ln_c_++, P++, Q += (Sp)) {                                                        \
                BODY                                                                               \
            }
#define MFT__LN_PERM_TILE 32
#define MFT__LN_PERM_TILED(Nb, C, Sp, P, Q, BODY)                                                  \
    for (int64_t ln_n_ = 0; ln_n_ < (Nb); ln_n_++)                                                 \
        for (int64_t ln_c0_ = 0; ln_c0_ < (C); ln_c0_ += MFT__LN_PERM_TILE)                        \
            for (int64_t ln_s0_ = 0; ln_s0_ < (Sp); ln_s0_ += MFT__LN_PERM_TILE)                   \
                for (int64_t ln_s_ = ln_s0_; ln_s_ < (Sp) && ln_s_ < ln_s0_ + MFT__LN_PERM_TILE;   \
                     ln_s_++)                                                                      \
                    for (int64_t ln_c_ = ln_c0_; ln_c_ < (C) && ln_c_ < ln_c0_ + MFT__LN_PERM_TILE; \
                         ln_c_++) {                                                                \
                        const int64_t P = (ln_n_ * (Sp) + ln_s_) * (C) + ln_c_;                    \
                        const int64_t Q = (ln_n_ * (C) + ln_c_) * (Sp) + ln_s_;                    \
                        BODY                                                                       \
                    }

#endif
