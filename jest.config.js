// Two projects: unit tests sit next to the code, e2e tests drive the real app over HTTP.
const moduleNameMapper = {
  '^@switchyard/(common|sandbox|workspace|context-graph|browser)$': '<rootDir>/libs/$1/src',
};
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.spec.json' }] };
const base = { rootDir: __dirname, testEnvironment: 'node', moduleNameMapper, transform, moduleFileExtensions: ['ts', 'js', 'json'] };

module.exports = {
  // Two cores on CI machines: more workers only make timing-sensitive sandbox tests contend.
  maxWorkers: 2,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs}/**/*.spec.ts'] },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      testTimeout: 60000,
    },
  ],
};
