/**
 * Load generator for `run.ts`, in its own process so the clients do not share the engine's event loop.
 * argv: <baseUrl> <seconds> <sessionId>...; prints `{"succeeded": n, "failed": n, "seconds": s}`.
 */
async function main(): Promise<void> {
  const [base, secondsArg, ...sessions] = process.argv.slice(2);
  const deadline = performance.now() + Number(secondsArg) * 1000;
  let succeeded = 0;
  let failed = 0;
  const t0 = performance.now();
  await Promise.all(
    sessions.map(async (sessionId, i) => {
      for (let n = 0; performance.now() < deadline; n++) {
        const body =
          n % 2 === 0
            ? { type: 'file', op: 'write', path: `f${i}.txt`, content: `v${n}` }
            : { type: 'file', op: 'read', path: `f${i}.txt` };
        const res = await fetch(`${base}/v1/sessions/${sessionId}/actions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const r = (await res.json()) as { status?: string };
        if (r.status === 'succeeded') succeeded++;
        else failed++;
      }
    }),
  );
  process.stdout.write(JSON.stringify({ succeeded, failed, seconds: (performance.now() - t0) / 1000 }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
