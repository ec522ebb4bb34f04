// Test-only entry: kept out of index.ts so production code never loads Jest-facing helpers.
export { describeContextGraphContract, type ContextGraphFixture } from './context-graph.contract';
