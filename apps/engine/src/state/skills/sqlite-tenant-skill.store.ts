import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { SkillDefinition } from './skill.types';
import type { SkillRecord } from './skill.types';
import { type TenantSkillAdded, TenantSkillStore } from './tenant-skill.store';

interface Row {
  tenant: string;
  name: string;
  definition: string;
  created_at: string;
}

/** Tenants' skills in the engine's SQLite file (SWITCHYARD_STATE=sqlite). */
@Injectable()
export class SqliteTenantSkillStore extends TenantSkillStore {
  private readonly db: DatabaseSync;

  constructor(file: EngineDb) {
    super();
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS skills (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (tenant, name)
      ) STRICT;
    `);
  }

  list(tenant: string): SkillRecord[] {
    return (
      this.db.prepare('SELECT * FROM skills WHERE tenant = ? ORDER BY name').all(tenant) as unknown as Row[]
    ).map(toRecord);
  }

  find(tenant: string, name: string): SkillRecord | undefined {
    const row = this.db.prepare('SELECT * FROM skills WHERE tenant = ? AND name = ?').get(tenant, name) as
      Row | undefined;
    return row && toRecord(row);
  }

  // One engine, and node:sqlite is synchronous: nothing runs between the count and the insert.
  async add(
    tenant: string,
    skill: SkillDefinition,
    createdAt: string,
    limit: number,
  ): Promise<TenantSkillAdded> {
    if (this.find(tenant, skill.name)) return 'exists';
    const { n } = this.db.prepare('SELECT COUNT(*) AS n FROM skills WHERE tenant = ?').get(tenant) as {
      n: number;
    };
    if (Number(n) >= limit) return 'limit';
    this.db
      .prepare('INSERT INTO skills (tenant, name, definition, created_at) VALUES (?, ?, ?, ?)')
      .run(tenant, skill.name, JSON.stringify(skill), createdAt);
    return 'added';
  }

  async remove(tenant: string, name: string): Promise<boolean> {
    const { changes } = this.db.prepare('DELETE FROM skills WHERE tenant = ? AND name = ?').run(tenant, name);
    return Number(changes) > 0;
  }
}

function toRecord(r: Row): SkillRecord {
  return { ...(JSON.parse(r.definition) as SkillDefinition), source: 'tenant', createdAt: r.created_at };
}
