export * from './spawn.types';
export { killProcessGroup } from './process-group';
export { SpawnedProcess } from './spawned-process';
export { Spawner, sharedSpawner } from './spawner';
export { CommandError, runCommand, type RunCommandOptions } from './run-command';
