/** Injection token of the validated `EngineConfig`. */
export const ENGINE_CONFIG = Symbol('ENGINE_CONFIG');
