// Two projects: unit tests sit next to the code, e2e tests drive the real app over HTTP.
const moduleNameMapper = {
  '^@switchyard/(common|sandbox|workspace|context-graph|browser|network)$': '<rootDir>/libs/$1/src',
};
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.spec.json' }] };
const base = {
  rootDir: __dirname,
  testEnvironment: 'node',
  moduleNameMapper,
  transform,
  moduleFileExtensions: ['ts', 'js', 'json'],
  // What the scripts run and keep there (the test cluster's etcd writes `.snap` files Jest would take for its own).
  modulePathIgnorePatterns: ['<rootDir>/.runtime/'],
};

module.exports = {
  // One file at a time: the sandbox and e2e suites assert on host-wide process counts and timings, which
  // parallel workers would disturb. The whole suite still runs in about a minute.
  maxWorkers: 1,
  // That one file at a time runs in a worker process that is replaced once it holds more than this after a file:
  // run in band, 200 files' leftovers grew one heap until its major collections paused the loop for over a second,
  // and the e2e tests that poll the engine's loop (event-loop.e2e) measured those pauses instead of the engine.
  workerIdleMemoryLimit: '1GB',
  // Per test; real Docker, Chromium and process restarts take seconds (Jest only honours this at the top level).
  testTimeout: 60000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  // The suites that stop a shared service (Docker, Neo4j) run last.
  testSequencer: '<rootDir>/test/support/test-sequencer.js',
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs,packages,bench}/**/*.spec.ts'] },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
    },
  ],
};
