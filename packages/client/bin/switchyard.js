#!/usr/bin/env node
// The CLI is compiled to dist/ by `npm run build` at the repository root.
require('../dist/cli.js')
  .main(process.argv.slice(2))
  .then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write(`switchyard: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
