// Jest's own order (failed first, then slowest or largest first), except that the suites which stop a service the
// whole run shares (Docker, Neo4j) come last: if one of them cannot bring its service back, only the suites after it
// suffer, and there are none.
const Sequencer = require('@jest/test-sequencer').default;

const STOP_SHARED_SERVICES = [/[\\/]docker-outage\.e2e-spec\.ts$/, /[\\/]neo4j-outage\.e2e-spec\.ts$/];
const stopsAService = (test) => STOP_SHARED_SERVICES.some((pattern) => pattern.test(test.path));

class SharedServicesLastSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    return [...sorted.filter((t) => !stopsAService(t)), ...sorted.filter(stopsAService)];
  }
}
module.exports = SharedServicesLastSequencer;
