import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { createEngineApp } from './bootstrap';
import { ConfigError, loadEngineConfig } from './platform/config/engine-config';

async function main(): Promise<void> {
  const config = loadEngineConfig(process.env);
  // A graph store the configuration names but cannot use (bad Neo4j address, login or database) fails here as a
  // ConfigError too, naming the variable.
  const app = await createEngineApp(config);
  await app.listen(config.port, config.host);
  new Logger('Engine').log({ msg: 'listening', url: await app.getUrl(), dataDir: config.dataDir });
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
