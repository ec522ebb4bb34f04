export { ContainerTier } from './container-tier';
export { ContainerModule, DockerModule, type DockerModuleOptions } from './container.module';
export {
  CONTAINER_OPTIONS,
  CONTAINER_TIER_LABEL,
  LABEL_ACTION,
  LABEL_ENGINE,
  LABEL_SESSION,
  LABEL_TIER,
} from './container.constants';
export { AHEAD_ACTION_LABEL } from './ahead-containers';
export {
  AHEAD_BOUNDS,
  CONTAINER_RUNTIME_SETTINGS,
  DEFAULT_AHEAD,
  DEFAULT_CONTAINER_LIMITS,
  currentImage,
  resolveContainerOptions,
  type AheadOptions,
  type ContainerLimits,
  type ContainerRuntimeSetting,
  type ContainerTierOptions,
  type ResolvedContainerOptions,
} from './container.options';
export { buildContainerSpec, containerStdin, tmpfsInodes, type ContainerSpecInput } from './container-spec';
export { GVISOR_SANDBOX_PIDS, GVISOR_SECCOMP_PROFILE } from './gvisor';
export {
  DOCKER_CLIENT,
  DockerClient,
  DockerodeClient,
  type ContainerExit,
  type ContainerStreams,
  type DockerCallOptions,
  type ContainerState,
  type ContainerSummary,
  type DockerRuntimes,
  type LabelFilter,
} from './docker-client';
export {
  DockerApiError,
  DockerError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
} from './docker.errors';
export {
  CONTAINER_RUNTIME_UNAVAILABLE,
  DOCKER_UNAVAILABLE,
  SANDBOX_IMAGE_MISSING,
  dockerUnreachable,
} from './docker-availability';
export { ImageRoots, type ImageRootsOptions } from './image-roots';
export { ImageRootsModule } from './image-roots.module';
