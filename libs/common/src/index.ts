export * from './action.types';
export * from './clock';
export * from './errors';
export * from './session-home';
export * from './display-result';
export * from './warm-target';
export * from './spawner';
