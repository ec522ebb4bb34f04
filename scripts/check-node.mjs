// Fails fast with a clear message when the build or the engine would run on an old Node.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(
    `switchyard needs Node 24+, but this is Node ${process.versions.node}.\n` +
      "Run it through npm (`npm start`, `npm test`): npm puts the project's own Node 24 (the `node` package) first on PATH.",
  );
  process.exit(1);
}
