import { Injectable, Logger, type OnApplicationShutdown, Optional } from '@nestjs/common';
import {
  type LaunchedProcess,
  type LaunchSpec,
  SpawnedProcess,
  type Spawner,
  sharedSpawner,
} from '@switchyard/common';
import { reapOrphanedSandboxes } from './orphan-reaper';
import { ProcessLauncher } from './process-launcher';

/**
 * Launches the tier's sandboxes through the engine's spawner (`Spawner`, @switchyard/common): a small process that
 * forks for the engine and hands the pipes back, so a launch does not hold the engine's event loop for a fork of the
 * whole engine. The launchers' parent is the spawner; it exits when the engine does (its channel closes), and their
 * `setpriv --pdeathsig` kills them then, as when the engine was their parent.
 */
@Injectable()
export class SpawnerProcessLauncher extends ProcessLauncher implements OnApplicationShutdown {
  private readonly logger = new Logger(SpawnerProcessLauncher.name);
  private shuttingDown = false;

  /** `spawner`: the engine process's one (default), or another (tests). */
  constructor(@Optional() private readonly spawner: Spawner = sharedSpawner()) {
    super();
    spawner.onLost = (message) => this.logger.warn(message);
  }

  launch(spec: LaunchSpec): LaunchedProcess {
    if (!this.shuttingDown) return this.spawner.launch(spec);
    const refused = new SpawnedProcess();
    refused.onFailed(new Error('the process spawner is shut down (the engine is stopping)'));
    return refused;
  }

  override reapOrphans(): number[] {
    return reapOrphanedSandboxes();
  }

  /** Refuses new launches; the spawner process goes once what it started has closed. */
  onApplicationShutdown(): void {
    this.shuttingDown = true;
    this.spawner.release();
  }

  /** The spawner process's pid, while one runs. */
  get spawnerPid(): number | undefined {
    return this.spawner.pid;
  }
}
