/** `ResolvedSandboxOptions` for every provider of the sandbox module. */
export const SANDBOX_OPTIONS = Symbol('switchyard:sandbox:options');

/**
 * Every registered `SandboxTier`, as an array. The manager routes only to tiers found here, so container tiers
 * plug in through `SandboxModule.forRoot(options, { tiers })` without touching the manager.
 */
export const SANDBOX_TIERS = Symbol('switchyard:sandbox:tiers');
