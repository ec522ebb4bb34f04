import { type Checkpoint, CheckpointError, CheckpointVault } from '@switchyard/workspace';
import type { PostgresDb } from '../storage/postgres-db';

/**
 * The most bytes of a tar in one `checkpoint_chunks` row: a workspace (and so its tar) may reach a GiB, and one
 * bytea value must stay well below Postgres's 1 GB limit; the driver reads a row back as hex, twice its size.
 */
export const CHECKPOINT_CHUNK_BYTES = 8 * 2 ** 20;

interface RecordRow {
  record: Checkpoint;
  tar_bytes: string;
  chunks: number;
}

/**
 * Pod checkpoints in the replicas' shared Postgres (SWITCHYARD_STATE=postgres), so that the replica taking a dead
 * one's sessions over restores their checkpoints: the record in `checkpoints` (as json: it goes back out as it came
 * in), the tar cut into `checkpoint_chunks` rows of at most `CHECKPOINT_CHUNK_BYTES`, all written in one
 * transaction (a crash leaves the checkpoint whole or absent) and deleted with their record (`ON DELETE CASCADE`).
 */
export class PostgresCheckpointVault extends CheckpointVault {
  constructor(private readonly db: PostgresDb) {
    super();
  }

  async put(checkpoint: Checkpoint, tar: Buffer): Promise<void> {
    const { sessionId, id } = checkpoint;
    const chunks = Math.ceil(tar.length / CHECKPOINT_CHUNK_BYTES);
    await this.db.tx(async (client) => {
      await client.query(
        `INSERT INTO checkpoints (session_id, id, created_at, record, tar_bytes, chunks)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [sessionId, id, checkpoint.createdAt, JSON.stringify(checkpoint), tar.length, chunks],
      );
      for (let n = 0; n < chunks; n++) {
        // A Buffer goes to the server as a binary parameter: no copy into hex on the way in.
        const data = tar.subarray(n * CHECKPOINT_CHUNK_BYTES, (n + 1) * CHECKPOINT_CHUNK_BYTES);
        await client.query(
          'INSERT INTO checkpoint_chunks (session_id, checkpoint_id, n, data) VALUES ($1, $2, $3, $4)',
          [sessionId, id, n, data],
        );
      }
    });
  }

  /** Chunk by chunk (never a GiB of hex in one answer), all from one snapshot (a `remove` meanwhile is not seen). */
  async get(sessionId: string, id: string): Promise<Buffer> {
    return this.db.tx(async (client) => {
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const found = await client.query<RecordRow>(
        'SELECT tar_bytes, chunks FROM checkpoints WHERE session_id = $1 AND id = $2',
        [sessionId, id],
      );
      const row = found.rows[0];
      if (!row) throw notFound(sessionId, id);
      const tar = Buffer.allocUnsafe(Number(row.tar_bytes));
      let at = 0;
      for (let n = 0; n < row.chunks; n++) {
        const chunk = await client.query<{ data: Buffer }>(
          'SELECT data FROM checkpoint_chunks WHERE session_id = $1 AND checkpoint_id = $2 AND n = $3',
          [sessionId, id, n],
        );
        const data = chunk.rows[0]?.data;
        if (!data || at + data.length > tar.length) break;
        at += data.copy(tar, at);
      }
      if (at !== tar.length) {
        throw new Error(`checkpoint ${id} of session ${sessionId}: its stored tar is not whole`);
      }
      return tar;
    });
  }

  async list(sessionId: string): Promise<Checkpoint[]> {
    const rows = await this.db.query<Pick<RecordRow, 'record'>>(
      'SELECT record FROM checkpoints WHERE session_id = $1 ORDER BY created_at, id',
      [sessionId],
    );
    return rows.map((r) => r.record);
  }

  async remove(sessionId: string, id: string): Promise<void> {
    await this.db.query('DELETE FROM checkpoints WHERE session_id = $1 AND id = $2', [sessionId, id]);
  }

  async forget(sessionId: string): Promise<void> {
    await this.db.query('DELETE FROM checkpoints WHERE session_id = $1', [sessionId]);
  }

  /**
   * Only sessions no replica serves: those gone from the shared `sessions` table (never one there, whichever replica
   * serves it, nor one of this engine's).
   */
  async sweep(known: ReadonlySet<string>): Promise<string[]> {
    const rows = await this.db.query<{ session_id: string }>(
      `DELETE FROM checkpoints c
       WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id) AND c.session_id <> ALL($1::text[])
       RETURNING c.session_id`,
      [[...known]],
    );
    return [...new Set(rows.map((r) => r.session_id))];
  }
}

function notFound(sessionId: string, id: string): CheckpointError {
  return new CheckpointError('CHECKPOINT_NOT_FOUND', `checkpoint ${id} not found in session ${sessionId}`, {
    sessionId,
    checkpointId: id,
  });
}
