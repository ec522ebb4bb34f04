export const HOOK_PHASES = ['before', 'after'] as const;
export type HookPhase = (typeof HOOK_PHASES)[number];
