export * from './action.types';
export * from './errors';
