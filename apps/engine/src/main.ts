import 'reflect-metadata';
import { Logger } from '@nestjs/common';
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
  const app = await createEngineApp(config);
  await app.listen(config.port, config.host);
  new Logger('Engine').log({ msg: 'listening', url: await app.getUrl(), dataDir: config.dataDir });
}

main().catch((err: unknown) => {
  process.stderr.write(
    `switchyard: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
