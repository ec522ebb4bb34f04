import { Logger } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { parse } from 'smol-toml';

/**
 * Tool descriptions an operator can edit without a rebuild: a TOML file read on every request,
 *
 * ```toml
 * [bash]
 * description = "Run shell commands…"
 * ```
 *
 * Missing or invalid, it is ignored (the error is logged) and the built-in descriptions apply. Names and schemas
 * stay in code.
 */
export class ToolDescriptions {
  private readonly logger = new Logger('Tools');
  private lastError?: string;

  constructor(private readonly file: string | undefined) {}

  /** Overrides by tool name (only non-empty string descriptions). */
  read(): Record<string, string> {
    if (!this.file) return {};
    try {
      const doc = parse(readFileSync(this.file, 'utf8'));
      const out: Record<string, string> = {};
      for (const [name, table] of Object.entries(doc)) {
        const description = (table as { description?: unknown } | undefined)?.description;
        if (typeof description === 'string' && description.trim()) out[name] = description.trim();
      }
      this.lastError = undefined;
      return out;
    } catch (err) {
      const message = `tool descriptions file ${this.file} ignored: ${(err as Error).message}`;
      // Logged once per distinct problem, not on every request.
      if (message !== this.lastError) this.logger.error(message);
      this.lastError = message;
      return {};
    }
  }
}
