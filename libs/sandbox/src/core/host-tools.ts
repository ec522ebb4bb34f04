/**
 * Where the subprocess tier finds `setpriv` and `nice` when `SandboxModuleOptions` names none. Kept apart from the
 * bwrap command line so the options can default them without importing a backend.
 */
export const DEFAULT_SETPRIV_PATH = '/usr/bin/setpriv';
export const DEFAULT_NICE_PATH = '/usr/bin/nice';
