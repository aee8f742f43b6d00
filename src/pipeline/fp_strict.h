/* Include first in a source file whose float arithmetic must stay exactly as
 * written: it turns off FMA contraction for the rest of the translation unit,
 * because bit-exactness with the reference relies on separately rounded ops
 * (intentional fusions call fma/fmaf).  Covers GCC in any mode, including
 * -ffp-contract=fast (its GNU-mode default) with -march=native, and clang's
 * default -ffp-contract=on.  An explicit clang -ffp-contract=fast overrides
 * all pragmas and breaks the golden tests; do not build with it. */
#ifndef H3_PIPELINE_FP_STRICT_H
#define H3_PIPELINE_FP_STRICT_H

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#endif
