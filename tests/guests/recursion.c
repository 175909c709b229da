/*
 * Runaway recursion, for the sandbox's stack-overflow classification. Activity `deep` recurses
 * forever with a local array on its stack in linear memory (which the C toolchain places
 * below the data), so it ends in an out-of-bounds access deep in the recursion; `shallow`
 * dereferences a stray pointer at once (the same trap code, no recursion).
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": [], "activities": ["deep", "shallow"]})

static int depth(volatile int n) {
    volatile char buf[64];
    buf[0] = (char)n;
    return depth(n + 1) + buf[0];
}

AMBER_ACTIVITY(deep) {
    int r = depth(0);
    (void)r;
    return amber_act_complete(act, args);
}

AMBER_ACTIVITY(shallow) {
    volatile int *stray = (volatile int *)0xFFFFFFF0u;
    *stray = 1;
    return amber_act_complete(act, args);
}
