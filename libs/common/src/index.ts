export * from './action.types';
export * from './clock';
export * from './errors';
