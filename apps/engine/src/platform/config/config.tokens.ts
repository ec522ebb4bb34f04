/** Injection token of the validated `EngineConfig`. */
export const ENGINE_CONFIG = Symbol('ENGINE_CONFIG');

/** Injection token of this engine process's id (`<host>:<pid>:<start>:<instance>`): its sandboxes' label, its replica id. */
export const ENGINE_INSTANCE_ID = Symbol('ENGINE_INSTANCE_ID');
