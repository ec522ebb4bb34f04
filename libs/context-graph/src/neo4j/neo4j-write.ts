/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

/**
 * Runs one statement in its own write transaction (the store's: tracked and retried); hands back its rows. Its own
 * file so the checkpoint and approval writers, which the statements file imports, need not import each other.
 */
export type WriteStatement = (query: string, params: Props) => Promise<Props[]>;
