import { DynamicModule, Module } from '@nestjs/common';
import { BrowserModule } from '@switchyard/browser';
import { ContextGraphModule } from '@switchyard/context-graph';
import {
  ContainerModule,
  ContainerTier,
  DEFAULT_SANDBOX_HOST_ID,
  PooledTier,
  PooledTierModule,
  SandboxModule,
} from '@switchyard/sandbox';
import { WorkspaceModule } from '@switchyard/workspace';
import * as path from 'node:path';
import { ActionsController } from './actions/actions.controller';
import { ExecutionEngine } from './actions/execution-engine.service';
import { CLOCK, type Clock, ENGINE_CONFIG, systemClock } from './config/config.tokens';
import type { EngineConfig } from './config/engine-config';
import { GraphController } from './graph/graph.controller';
import { HealthController } from './health/health.controller';
import { ApiKeyGuard } from './http/api-key.guard';
import { SessionStore } from './sessions/session.store';
import { SessionsController } from './sessions/sessions.controller';
import { SessionsService } from './sessions/sessions.service';
import { SqliteSessionStore } from './sessions/sqlite-session.store';

/** Composition root: wires the libraries from one validated configuration. */
@Module({})
export class AppModule {
  static forRoot(config: EngineConfig, overrides: { clock?: Clock } = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ContextGraphModule.forRoot({ store: 'embedded', sqlitePath: path.join(config.dataDir, 'graph.db') }),
        WorkspaceModule.forRoot({
          root: path.join(config.dataDir, 'workspaces'),
          limits: {
            maxFileBytes: config.workspace.maxFileBytes,
            maxWorkspaceBytes: config.workspace.maxWorkspaceBytes,
            maxPathLength: 4096,
          },
          // Workspaces belong to the uid sandboxed code runs as (applied only when the engine is root).
          sandboxUid: DEFAULT_SANDBOX_HOST_ID,
          sandboxGid: DEFAULT_SANDBOX_HOST_ID,
        }),
        SandboxModule.forRoot(
          {
            defaultTimeoutMs: config.sandbox.defaultTimeoutMs,
            maxTimeoutMs: config.sandbox.maxTimeoutMs,
            maxCodeBytes: config.sandbox.maxCodeBytes,
            output: config.sandbox.output,
            allowWeakerTier: config.sandbox.allowWeakerTier,
            risk: {
              thresholds: config.sandbox.riskThresholds,
              disabledRules: config.sandbox.disabledRiskRules,
            },
            subprocess: {
              memoryBytes: config.sandbox.subprocess.memoryBytes,
              pids: config.sandbox.subprocess.pids,
            },
            tempDir: path.join(config.dataDir, 'tmp'),
          },
          {
            // One Docker client (imported by ContainerModule) shared by both container tiers.
            imports: [ContainerModule.forRoot({}), PooledTierModule.forRoot({}, false)],
            tiers: [ContainerTier, PooledTier],
          },
        ),
        BrowserModule,
      ],
      controllers: [SessionsController, ActionsController, GraphController, HealthController],
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: overrides.clock ?? systemClock },
        {
          provide: SessionStore,
          useFactory: () => new SqliteSessionStore(path.join(config.dataDir, 'engine.db')),
        },
        ApiKeyGuard,
        SessionsService,
        ExecutionEngine,
      ],
    };
  }
}
