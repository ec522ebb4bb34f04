import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { GraphStoreConnectionError } from '@switchyard/context-graph';
import { createEngineApp } from './bootstrap';
import { ConfigError, loadEngineConfig } from './config/engine-config';

async function main(): Promise<void> {
  let config;
  try {
    config = loadEngineConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`switchyard: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  let app;
  try {
    app = await createEngineApp(config);
  } catch (err) {
    // A store named by the configuration that cannot be used (bad Neo4j address or login) is a configuration error.
    if (err instanceof GraphStoreConnectionError) {
      process.stderr.write(`switchyard: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  await app.listen(config.port, config.host);
  new Logger('Engine').log({ msg: 'listening', url: await app.getUrl(), dataDir: config.dataDir });
}

main().catch((err: unknown) => {
  process.stderr.write(
    `switchyard: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
