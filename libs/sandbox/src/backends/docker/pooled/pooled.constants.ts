/** `ResolvedPooledOptions` for the pooled tier's providers. */
export const POOLED_OPTIONS = Symbol('switchyard:sandbox:pooled:options');
