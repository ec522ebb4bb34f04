/** The typed client reads `process.env` in Node; the console's bundle defines those reads as `undefined`. */
declare const process: { env: Record<string, string | undefined> };
