export * from './pooled.options';
export * from './pooled.constants';
export { PooledTierModule } from './pooled.module';
export { PooledTier, type PooledStats } from './pooled-tier';
export type { WarmPoolStats } from './warm-pool';
export { HostMounts, ChildProcessHostMounts, parseMountInfo, type MountEntry } from './host-mounts';
export { buildContainerConfig, POOLED_LABELS, POOLED_TIER_LABEL, RUNNER_CMD } from './container-config';
