import { PassThrough } from 'node:stream';

/**
 * The stdout and stderr of a fake process or container, for tier specs: a fake program writes to them with `out` and
 * `err`, chained.
 *
 * @internal
 */
export class FakeOutput {
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();

  out(text: string): this {
    this.stdout.write(text);
    return this;
  }

  err(text: string): this {
    this.stderr.write(text);
    return this;
  }
}

/** Docker's label filter, as fake Docker engines apply it: `true` asks only that the label exists. @internal */
export function matchesLabels(
  labels: Record<string, string>,
  filter: Record<string, string | true>,
): boolean {
  return Object.entries(filter).every(([k, v]) => (v === true ? k in labels : labels[k] === v));
}
