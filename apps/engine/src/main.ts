import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { createEngineApp } from './bootstrap';
import { ConfigError, loadEngineConfig } from './platform/config/engine-config';

async function main(): Promise<void> {
  const config = loadEngineConfig(process.env);
  // Until the server listens nothing else need keep the process alive: start-up waits on timers that are unref'd so
  // they never hold a shutdown (a Kubernetes pod started for a session reopened at start-up is polled that way), and
  // node would exit 0 in the middle of it.
  const starting = setInterval(() => undefined, 60_000);
  try {
    // A graph store the configuration names but cannot use (bad Neo4j address, login or database) fails here as a
    // ConfigError too, naming the variable.
    const app = await createEngineApp(config);
    await app.listen(config.port, config.host);
    new Logger('Engine').log({ msg: 'listening', url: await app.getUrl(), dataDir: config.dataDir });
  } finally {
    clearInterval(starting);
  }
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`switchyard: ${err.message}\n`);
    process.exit(78); // EX_CONFIG
  }
  process.stderr.write(
    `switchyard: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
