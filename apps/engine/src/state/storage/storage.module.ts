import { type DynamicModule, Global, Module, type Provider, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { EngineDb } from './engine-db';
import { PostgresDb } from './postgres-db';

/**
 * The engine's own SQLite file (always: what stays a replica's own), and with SWITCHYARD_STATE=postgres the replicas'
 * shared Postgres, opened and migrated before any store is built.
 */
@Global()
@Module({})
export class StorageModule {
  static forRoot(config: EngineConfig): DynamicModule {
    const providers: Provider[] = [EngineDb];
    const state = config.state;
    if (state.store === 'postgres') {
      providers.push({
        provide: PostgresDb,
        useFactory: () => PostgresDb.open({ url: state.databaseUrl, poolSize: state.poolSize }),
      });
    }
    return {
      module: StorageModule,
      providers,
      exports: providers.map((p) => ('provide' in p ? p.provide : p)),
    };
  }
}

/** A store that has start-up work (loading a cache, listening for changes). */
interface Initialisable {
  init?(): Promise<void>;
}

/**
 * Provides `port` with the adapter of the configured state store: `sqlite` (engine.db) or `postgres` (shared by the
 * replicas). Only the chosen one is built, so the other's dependencies need not exist.
 */
export function stateStore<T extends object>(
  port: abstract new (...args: never[]) => T,
  adapters: { sqlite: Type<T>; postgres: Type<T> },
): Provider {
  return {
    provide: port,
    inject: [ENGINE_CONFIG, ModuleRef],
    useFactory: async (config: EngineConfig, ref: ModuleRef): Promise<T> => {
      const store = await ref.create(adapters[config.state.store]);
      await (store as Initialisable).init?.();
      return store;
    },
  };
}
