/** `ResolvedContainerOptions` for the one-off container tier. */
export const CONTAINER_OPTIONS = Symbol('switchyard:sandbox:container-options');

/**
 * Labels on every container Switchyard starts, so a reaper can find leftovers after a crash (SECURITY.md #17).
 * The pooled tier uses the same names with its own `dev.switchyard.tier` value.
 */
export const LABEL_ENGINE = 'dev.switchyard.engine';
export const LABEL_SESSION = 'dev.switchyard.session';
export const LABEL_TIER = 'dev.switchyard.tier';
export const LABEL_ACTION = 'dev.switchyard.action';

/** `dev.switchyard.tier` of one-off containers. */
export const CONTAINER_TIER_LABEL = 'container';
