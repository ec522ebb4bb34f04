// Prints one plain closing line ("tests: N passed, N failed") that CI reads regardless of runner, and where the time
// went: a line for any file still running after STUCK_MS (again each minute, naming its last finished test), and the
// slowest files with the run's elapsed time at the end, so a CI log that shows only its tail still says which files
// took the time.
const path = require('node:path');

const STUCK_MS = 300_000;
const CHECK_MS = 60_000;
/** Every this often, a progress line: files done, elapsed, and the slowest so far. */
const PROGRESS_MS = 300_000;
const SLOWEST = 12;

const clock = (ms) => {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

class SummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.started = Date.now();
    /** path -> { at, lastTest } of the files running now. */
    this.running = new Map();
    /** [path, ms] of the files done. */
    this.done = [];
    this.lastProgress = this.started;
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
  }

  name(testPath) {
    return path.relative(this.rootDir, testPath);
  }

  onTestFileStart(test) {
    this.running.set(test.path, { at: Date.now(), lastTest: undefined });
  }

  onTestCaseResult(test, result) {
    const file = this.running.get(test.path);
    if (file) file.lastTest = `${result.fullName} (${result.status}, ${result.duration ?? 0} ms)`;
  }

  onTestFileResult(test) {
    const file = this.running.get(test.path);
    this.running.delete(test.path);
    if (file) this.done.push([this.name(test.path), Date.now() - file.at]);
  }

  check() {
    const now = Date.now();
    if (now - this.lastProgress >= PROGRESS_MS) {
      this.lastProgress = now;
      const [name, ms] = [...this.done].sort((a, b) => b[1] - a[1])[0] ?? ['none', 0];
      process.stderr.write(
        `[jest +${clock(now - this.started)}] ${this.done.length} files done; slowest so far ${name} (${clock(ms)})\n`,
      );
    }
    for (const [testPath, file] of this.running) {
      if (now - file.at < STUCK_MS) continue;
      process.stderr.write(
        `[jest +${clock(now - this.started)}] still running after ${clock(now - file.at)}: ${this.name(testPath)}` +
          `; last finished test: ${file.lastTest ?? 'none yet'}\n`,
      );
    }
  }

  onRunComplete(_contexts, results) {
    clearInterval(this.timer);
    const slowest = [...this.done].sort((a, b) => b[1] - a[1]).slice(0, SLOWEST);
    const lines = slowest.map(([name, ms]) => `  ${clock(ms).padStart(6)}  ${name}`);
    process.stdout.write(
      `\nJest ran ${this.done.length} files in ${clock(Date.now() - this.started)}; the slowest:\n${lines.join('\n')}\n`,
    );
    const skipped = results.numPendingTests + results.numTodoTests;
    const line = `tests: ${results.numPassedTests} passed, ${results.numFailedTests} failed`;
    process.stdout.write(`\n${skipped > 0 ? `${line}, ${skipped} skipped` : line}\n`);
  }
}
module.exports = SummaryReporter;
