/**
 * The `CheckpointVault` contract on both adapters, against real storage: the engine's disk (a temporary dir) and the
 * replicas' Postgres (a fresh database on the test PostgreSQL, started if needed). Then what only Postgres has: the
 * tar's chunks, a connection cut mid-put, the sweep that spares other replicas' sessions, and a takeover (a
 * second replica's `PodCheckpointStore` restoring what the first took).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Test } from '@nestjs/testing';
import {
  type Checkpoint,
  CHECKPOINT_VAULT,
  type CheckpointVault,
  DiskCheckpointVault,
  isCheckpointId,
  PodCheckpointStore,
  type PodWorkspaceIo,
} from '@switchyard/workspace';
import { freshPostgres } from '../../../../../test/support/state-stores';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { PostgresDb } from '../../state/storage/postgres-db';
import {
  CHECKPOINT_CHUNK_BYTES,
  PostgresCheckpointVault,
} from '../../state/workspaces/postgres-checkpoint-vault';
import { checkpointVaultProvider } from './workspace-io';

const MiB = 2 ** 20;

/** One adapter's storage, and what the contract needs of it. */
interface VaultFixture {
  /** A vault on the storage, as one more replica (or engine) would open it; closed by `close`. */
  open(): Promise<CheckpointVault>;
  /** Makes putting checkpoint `id` fail inside, once part of it is written; answers how to undo that. */
  breakPut(sessionId: string, id: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

let ids = 0;
function record(sessionId: string, overrides: Partial<Checkpoint> = {}): Checkpoint {
  const id = `chk_${(++ids).toString(16).padStart(8, '0')}${randomBytes(8).toString('hex')}`;
  return {
    id,
    sessionId,
    createdAt: new Date(Date.UTC(2030, 0, 1, 0, 0, ids)).toISOString(),
    files: 3,
    directories: 1,
    bytes: 42,
    auto: false,
    ...overrides,
  };
}

const notFound = { code: 'CHECKPOINT_NOT_FOUND', kind: 'not_found' };

const adapters: Array<[string, () => Promise<VaultFixture>]> = [
  [
    'DiskCheckpointVault',
    () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'checkpoint-vault-'));
      return Promise.resolve({
        open: () => Promise.resolve(new DiskCheckpointVault(dir)),
        // A directory where the record goes: its rename fails after the tar is in place.
        breakPut: (sessionId, id) => {
          const record = path.join(dir, sessionId, `${id}.json`);
          mkdirSync(record, { recursive: true });
          return Promise.resolve(() => Promise.resolve(rmSync(record, { recursive: true, force: true })));
        },
        close: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
      });
    },
  ],
  [
    'PostgresCheckpointVault',
    async () => {
      const pg = await freshPostgres();
      let admin: PostgresDb | undefined;
      return {
        open: async () => new PostgresCheckpointVault(await pg.open()),
        // A trigger that refuses the tar's second chunk: the record and the first chunk are in by then.
        breakPut: async (_sessionId, id) => {
          if (!isCheckpointId(id)) throw new Error(id);
          admin ??= await pg.open();
          await admin.query(`CREATE OR REPLACE FUNCTION refuse_chunk() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.checkpoint_id = TG_ARGV[0] AND NEW.n >= 1 THEN RAISE EXCEPTION 'refused by the test'; END IF;
              RETURN NEW;
            END $$`);
          await admin.query(`CREATE TRIGGER refuse_chunk BEFORE INSERT ON checkpoint_chunks
            FOR EACH ROW EXECUTE FUNCTION refuse_chunk('${id}')`);
          return async () => void (await admin?.query('DROP TRIGGER refuse_chunk ON checkpoint_chunks'));
        },
        close: () => pg.close(),
      };
    },
  ],
];

describe.each(adapters)('CheckpointVault contract: %s', (_name, make) => {
  let fixture: VaultFixture;
  let vault: CheckpointVault;

  beforeEach(async () => {
    fixture = await make();
    vault = await fixture.open();
  });
  afterEach(() => fixture.close());

  it('puts, gets, lists oldest first, removes and forgets', async () => {
    const a = record('ses_a', { label: 'first', seq: 7, actionId: 'act_1', auto: true });
    const b = record('ses_a');
    const sameTime = [
      record('ses_a', { createdAt: b.createdAt }),
      record('ses_a', { createdAt: b.createdAt }),
    ];
    const other = record('ses_b');
    const tars = new Map<string, Buffer>();
    // Put out of order: the list sorts by creation time, then id.
    for (const c of [sameTime[1], b, other, a, sameTime[0]]) {
      tars.set(c.id, randomBytes(1000 + c.id.charCodeAt(12)));
      await vault.put(c, tars.get(c.id) as Buffer);
    }
    const sorted = [b, ...sameTime].sort((x, y) => x.id.localeCompare(y.id));
    expect(await vault.list('ses_a')).toEqual([a, ...sorted]);
    expect(await vault.list('ses_b')).toEqual([other]);
    expect(await vault.list('ses_none')).toEqual([]);
    for (const c of [a, b, other])
      expect((await vault.get(c.sessionId, c.id)).equals(tars.get(c.id) as Buffer)).toBe(true);

    await vault.remove('ses_a', b.id);
    expect((await vault.list('ses_a')).map((c) => c.id)).toEqual([a.id, ...sameTime.map((c) => c.id).sort()]);
    await expect(vault.get('ses_a', b.id)).rejects.toMatchObject(notFound);
    await vault.remove('ses_a', b.id); // absent: nothing to do
    await expect(vault.get('ses_b', a.id)).rejects.toMatchObject(notFound); // another session's id

    await vault.forget('ses_a');
    expect(await vault.list('ses_a')).toEqual([]);
    await expect(vault.get('ses_a', a.id)).rejects.toMatchObject(notFound);
    expect(await vault.list('ses_b')).toEqual([other]);
    await vault.forget('ses_none');
  });

  it('round-trips a tar of several chunks byte for byte, and an empty one', async () => {
    const big = record('ses_big');
    const tar = randomBytes(20 * MiB + 12_345); // incompressible, and not a whole number of chunks
    await vault.put(big, tar);
    expect((await vault.get('ses_big', big.id)).equals(tar)).toBe(true);
    const empty = record('ses_big');
    await vault.put(empty, Buffer.alloc(0));
    expect(await vault.get('ses_big', empty.id)).toEqual(Buffer.alloc(0));
    expect(await vault.list('ses_big')).toEqual([big, empty]);
  });

  it("another replica's vault sees and restores what one put, and its deletes are seen back", async () => {
    const c = record('ses_r', { label: 'before the crash' });
    const tar = randomBytes(20 * MiB);
    await vault.put(c, tar);
    const other = await fixture.open();
    expect(await other.list('ses_r')).toEqual([c]);
    expect((await other.get('ses_r', c.id)).equals(tar)).toBe(true);
    await other.remove('ses_r', c.id);
    expect(await vault.list('ses_r')).toEqual([]);
  });

  it('a put that fails inside leaves nothing, and the same checkpoint can be put again', async () => {
    const kept = record('ses_f');
    await vault.put(kept, Buffer.from('kept'));
    const c = record('ses_f');
    const tar = randomBytes(20 * MiB);
    const repair = await fixture.breakPut('ses_f', c.id);
    await expect(vault.put(c, tar)).rejects.toThrow();
    expect(await vault.list('ses_f')).toEqual([kept]);
    await expect(vault.get('ses_f', c.id)).rejects.toMatchObject(notFound);
    expect((await fixture.open().then((v) => v.list('ses_f'))).map((x) => x.id)).toEqual([kept.id]);
    await repair();
    await vault.put(c, tar);
    expect((await vault.get('ses_f', c.id)).equals(tar)).toBe(true);
    expect(await vault.list('ses_f')).toEqual([kept, c]);
  });

  it('sweeps the checkpoints of sessions gone, never those of the sessions it is told of', async () => {
    const mine = record('ses_mine');
    const gone = record('ses_gone');
    await vault.put(mine, Buffer.from('mine'));
    await vault.put(gone, Buffer.from('gone'));
    expect(await vault.sweep(new Set(['ses_mine']))).toEqual(['ses_gone']);
    expect(await vault.list('ses_mine')).toEqual([mine]);
    expect(await vault.list('ses_gone')).toEqual([]);
    expect(await vault.sweep(new Set(['ses_mine']))).toEqual([]);
  });
});

describe('DiskCheckpointVault on disk', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'checkpoint-vault-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps a tar beside its record, and a failed put's leftovers go at the next list", async () => {
    const vault = new DiskCheckpointVault(dir);
    const c = record('ses_d');
    await vault.put(c, Buffer.from('tar'));
    expect(readdirSync(path.join(dir, 'ses_d')).sort()).toEqual([c.id, `${c.id}.json`]);
    expect(JSON.parse(readFileSync(path.join(dir, 'ses_d', `${c.id}.json`), 'utf8'))).toEqual(c);
    const failed = record('ses_d');
    mkdirSync(path.join(dir, 'ses_d', `${failed.id}.json`));
    await expect(vault.put(failed, Buffer.from('tar'))).rejects.toThrow();
    expect(await vault.list('ses_d')).toEqual([c]);
    expect(readdirSync(path.join(dir, 'ses_d')).sort()).toEqual([c.id, `${c.id}.json`]);
  });
});

describe('PostgresCheckpointVault on Postgres', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  let db: PostgresDb;
  let vault: PostgresCheckpointVault;

  beforeEach(async () => {
    pg = await freshPostgres();
    db = await pg.open();
    vault = new PostgresCheckpointVault(db);
  });
  afterEach(() => pg.close());

  const chunksOf = (id: string) =>
    db.query<{ n: number; size: number }>(
      'SELECT n, octet_length(data) AS size FROM checkpoint_chunks WHERE checkpoint_id = $1 ORDER BY n',
      [id],
    );

  it('keeps a tar in rows of at most CHECKPOINT_CHUNK_BYTES, deleted with their record', async () => {
    const c = record('ses_c');
    const size = 2 * CHECKPOINT_CHUNK_BYTES + 1;
    await vault.put(c, randomBytes(size));
    expect(await chunksOf(c.id)).toEqual([
      { n: 0, size: CHECKPOINT_CHUNK_BYTES },
      { n: 1, size: CHECKPOINT_CHUNK_BYTES },
      { n: 2, size: 1 },
    ]);
    await vault.remove('ses_c', c.id);
    expect(await chunksOf(c.id)).toEqual([]);
  });

  it('a put whose connection is cut midway (the replica dies) leaves no record and no chunk', async () => {
    const writer = new PostgresCheckpointVault(await pg.open());
    const c = record('ses_cut');
    const put = writer.put(c, randomBytes(8 * CHECKPOINT_CHUNK_BYTES));
    let settled = false;
    const outcome = put.then(
      () => 'committed',
      (err: Error) => err.message,
    );
    void outcome.finally(() => (settled = true));
    let killed = false;
    while (!killed && !settled) {
      const [row] = await db.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
           AND query LIKE 'INSERT INTO checkpoint_chunks%'`,
      );
      if (row) killed = (await db.query('SELECT pg_terminate_backend($1)', [row.pid])).length > 0;
      else await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(killed).toBe(true);
    expect(await outcome).not.toBe('committed');
    expect(await vault.list('ses_cut')).toEqual([]);
    expect(await chunksOf(c.id)).toEqual([]);
    await expect(vault.get('ses_cut', c.id)).rejects.toMatchObject(notFound);
  });

  it('is the vault the engine gives pod checkpoints with SWITCHYARD_STATE=postgres, and none otherwise', async () => {
    const vaultOf = async (store: 'sqlite' | 'postgres', withDb: boolean): Promise<unknown> => {
      const module = await Test.createTestingModule({
        providers: [
          { provide: ENGINE_CONFIG, useValue: { state: { store } } },
          ...(withDb ? [{ provide: PostgresDb, useValue: db }] : []),
          checkpointVaultProvider,
        ],
      }).compile();
      return module.get(CHECKPOINT_VAULT);
    };
    expect(await vaultOf('postgres', true)).toBeInstanceOf(PostgresCheckpointVault);
    expect(await vaultOf('sqlite', false)).toBeNull();
    await expect(vaultOf('postgres', false)).rejects.toThrow(/PostgresDb/);
  });

  it("sweeps a session only once it is gone from the shared sessions table (another replica's stays)", async () => {
    await db.query(
      `INSERT INTO sessions (id, tenant, created_at, last_active_at, ttl_seconds, metadata, max_concurrent_actions,
         options, owner)
       VALUES ('ses_elsewhere', 't', now(), now(), 60, '{}', 1, '{}', 'rep_other')`,
    );
    const elsewhere = record('ses_elsewhere');
    const gone = record('ses_gone');
    await vault.put(elsewhere, Buffer.from('a'));
    await vault.put(gone, Buffer.from('b'));
    expect(await vault.sweep(new Set())).toEqual(['ses_gone']);
    expect(await vault.list('ses_elsewhere')).toEqual([elsewhere]);
    await db.query("DELETE FROM sessions WHERE id = 'ses_elsewhere'");
    expect(await vault.sweep(new Set())).toEqual(['ses_elsewhere']);
  });

  it("a replica taking a session over restores the dead one's checkpoint into the session's new workspace", async () => {
    const base = mkdtempSync(path.join(tmpdir(), 'checkpoint-takeover-'));
    try {
      // The pods' workspaces as directories, tarred out and in with the system tar (as the pods do).
      const ws = path.join(base, 'ws');
      const io: PodWorkspaceIo = {
        tarOut: () =>
          Promise.resolve(execFileSync('tar', ['-C', ws, '-cf', '-', '.'], { maxBuffer: 64 * MiB })),
        tarIn: (_id, tar, { replace }) => {
          if (replace) rmSync(ws, { recursive: true, force: true });
          mkdirSync(ws, { recursive: true });
          execFileSync('tar', ['-x', '-C', ws, '-f', '-'], { input: tar });
          return Promise.resolve();
        },
      };
      mkdirSync(path.join(ws, 'src'), { recursive: true });
      writeFileSync(path.join(ws, 'src/app.py'), 'print("v1")\n');
      writeFileSync(path.join(ws, 'data.bin'), randomBytes(10 * MiB));
      const before = readFileSync(path.join(ws, 'data.bin'));
      const dying = await pg.open();
      const a = new PodCheckpointStore({ vault: new PostgresCheckpointVault(dying), io, maxBytes: 64 * MiB });
      const c = await a.create({ ...record('ses_t'), label: 'before' });
      await dying.onApplicationShutdown();

      rmSync(ws, { recursive: true, force: true }); // the new pod's workspace: empty
      mkdirSync(ws);
      const b = new PodCheckpointStore({
        vault: new PostgresCheckpointVault(await pg.open()),
        io,
        maxBytes: 64 * MiB,
      });
      expect(await b.list('ses_t')).toEqual([c]);
      const stats = await b.restore('ses_t', c.id);
      expect(stats.bytesCopied).toBe(before.length + 12);
      expect(readFileSync(path.join(ws, 'src/app.py'), 'utf8')).toBe('print("v1")\n');
      expect(readFileSync(path.join(ws, 'data.bin')).equals(before)).toBe(true);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
