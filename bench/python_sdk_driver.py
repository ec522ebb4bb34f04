"""The Python side of bench/python-sdk.ts: python `print(1)` as a session-kernel cell through the SDK and through a
raw HTTP request of the same body, from one Python process, samples interleaved, timed here with perf_counter.

    python bench/python_sdk_driver.py BASE_URL RUNS   # prints {"raw": [ms…], "sdk": [ms…], "raw_async": …, …}

Also a cheap call, `GET /v1/sessions/:id` (`sessions.get`), where the client's own cost is a larger share.

Both sides keep one HTTP connection alive (an httpx client each), as an agent's process would; each sample checks
the answer printed 1. The order alternates (raw then SDK, then SDK then raw): a call that follows another one of the
session's may wait on what the engine still does after answering it, and neither side should always pay that.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx
from switchyard import AsyncSandbox, Sandbox

BODY = {"type": "code", "language": "python", "code": "print(1)", "state": "session"}
WARM_UP = 5


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"bench: {what}: not the expected answer")


def timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1000


def sync_samples(base: str, runs: int) -> dict[str, list[float]]:
    with Sandbox.create(base_url=base) as sbx, httpx.Client(timeout=None) as raw:
        url = f"{base}/v1/sessions/{sbx.id}/actions"

        def raw_call() -> None:
            r = raw.post(url, json=BODY).json()
            check(r["status"] == "succeeded" and r["stdout"] == "1\n", "raw")

        def sdk_call() -> None:
            check(sbx.run_code("print(1)").logs.stdout == "1\n", "sdk")

        def raw_get() -> None:
            check(raw.get(f"{base}/v1/sessions/{sbx.id}").json()["id"] == sbx.id, "raw get")

        def sdk_get() -> None:
            check(sbx.client.sessions.get(sbx.id).id == sbx.id, "sdk get")

        out: dict[str, list[float]] = {"raw": [], "sdk": [], "raw_get": [], "sdk_get": []}
        calls = {"raw": raw_call, "sdk": sdk_call, "raw_get": raw_get, "sdk_get": sdk_get}
        for pair in (("raw", "sdk"), ("raw_get", "sdk_get")):
            for _ in range(WARM_UP):
                calls[pair[0]]()
                calls[pair[1]]()
            for i in range(runs):
                for side in pair if i % 2 == 0 else pair[::-1]:
                    out[side].append(timed(calls[side]))
        return out


async def async_samples(base: str, runs: int) -> dict[str, list[float]]:
    async with await AsyncSandbox.create(base_url=base) as sbx, httpx.AsyncClient(timeout=None) as raw:
        url = f"{base}/v1/sessions/{sbx.id}/actions"

        async def raw_call() -> None:
            r = (await raw.post(url, json=BODY)).json()
            check(r["status"] == "succeeded" and r["stdout"] == "1\n", "raw async")

        async def sdk_call() -> None:
            check((await sbx.run_code("print(1)")).logs.stdout == "1\n", "sdk async")

        async def timed_async(fn: object) -> float:
            t0 = time.perf_counter()
            await fn()  # type: ignore[operator]
            return (time.perf_counter() - t0) * 1000

        for _ in range(WARM_UP):
            await raw_call()
            await sdk_call()
        out: dict[str, list[float]] = {"raw_async": [], "sdk_async": []}
        for i in range(runs):
            for side in ("raw_async", "sdk_async") if i % 2 == 0 else ("sdk_async", "raw_async"):
                out[side].append(await timed_async(raw_call if side == "raw_async" else sdk_call))
        return out


def main() -> None:
    base, runs = sys.argv[1], int(sys.argv[2])
    samples = sync_samples(base, runs)
    samples.update(asyncio.run(async_samples(base, runs)))
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
