// Names shared with the testkit's policies.

/** The global the `showcase-hostile` policy's markup would set if any of it ran. */
export const HOSTILE_GLOBAL = "__deepsolvePwned";
