import { DatabaseSync } from 'node:sqlite';
import { GroupCommitQueue } from './group-commit-queue';

// Exercises the whole-transaction failure paths, which the adapter's own writes cannot easily provoke.
describe('GroupCommitQueue', () => {
  let db: DatabaseSync;
  let queue: GroupCommitQueue;
  const insert = (id: number, parent: number | null) => () =>
    db.prepare('INSERT INTO t (id, parent) VALUES (?, ?)').run(id, parent);
  const ids = () =>
    db
      .prepare('SELECT id FROM t ORDER BY id')
      .all()
      .map((r) => r.id);

  beforeEach(() => {
    db = new DatabaseSync(':memory:');
    // A deferred foreign key is only checked at COMMIT, so a bad row fails the whole transaction.
    db.exec(`PRAGMA foreign_keys = ON;
      CREATE TABLE t (id INTEGER PRIMARY KEY,
        parent INTEGER REFERENCES t(id) DEFERRABLE INITIALLY DEFERRED)`);
    queue = new GroupCommitQueue(db);
  });
  afterEach(() => db.close());

  it('replays a batch one write per transaction when its COMMIT fails', async () => {
    const results = await Promise.allSettled([
      queue.enqueue(insert(1, null)),
      queue.enqueue(insert(2, 99)), // dangling parent: fails at COMMIT
      queue.enqueue(insert(3, 1)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(ids()).toEqual([1, 3]);
    expect(queue.stats()).toEqual({ transactions: 2, writes: 2 });
  });

  it('replays a batch when a write aborts the whole transaction', async () => {
    const abort = () => {
      db.exec('ROLLBACK'); // what SQLite does itself on SQLITE_FULL or an I/O error
      throw new Error('disk full');
    };
    const results = await Promise.allSettled([
      queue.enqueue(insert(1, null)),
      queue.enqueue(abort),
      queue.enqueue(insert(2, null)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toEqual(new Error('disk full'));
    expect(ids()).toEqual([1, 2]);
    expect(db.isTransaction).toBe(false);
  });

  it('settles a batch only after the durability sync that follows its commit', async () => {
    let release!: () => void;
    const syncs: string[] = [];
    const synced = new GroupCommitQueue(db, 500, () => {
      syncs.push(`sync after ${ids().join(',')}`);
      return new Promise<void>((resolve) => (release = resolve));
    });
    let settled = false;
    const write = synced.enqueue(insert(1, null)).then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(ids()).toEqual([1]); // committed…
    expect(syncs).toEqual(['sync after 1']);
    expect(settled).toBe(false); // …but not acknowledged before the sync ends
    release();
    await write;
    expect(settled).toBe(true);
  });

  it('rejects a batch whose durability sync fails', async () => {
    const failing = new GroupCommitQueue(db, 500, () => Promise.reject(new Error('EIO')));
    await expect(failing.enqueue(insert(1, null))).rejects.toThrow('EIO');
  });

  it('drain commits queued writes synchronously', () => {
    void queue.enqueue(insert(1, null));
    void queue.enqueue(insert(2, 1));
    queue.drain();
    expect(ids()).toEqual([1, 2]);
    expect(queue.stats()).toEqual({ transactions: 1, writes: 2 });
  });
});
