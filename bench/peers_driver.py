"""The peers' side of `bench/peers.ts`: epicbox, llm-sandbox and raw Docker SDK calls, one sample per request.

Runs in the pinned venv of `scripts/peers-venv.sh` and serves JSON lines on stdin/stdout, so the Node bench can
interleave these samples with its own API calls (A, B, A, B...) in one run. Each request names a side; the answer
is `{"ms": wall time}` or `{"error": "..."}`. Every side checks that python `print(1)` printed 1.

  {"side": "epicbox"}                epicbox.run: create -> start -> wait -> logs -> remove, network disabled (runc)
  {"side": "docker_run", "runtime": "runc"|"runsc"}
                                     docker run --rm through the Docker SDK (containers.run(remove=True))
  {"side": "llm_sandbox"}            session.run("print(1)") in an open llm-sandbox session (its warm path)
  {"side": "close"}                  closes the llm-sandbox session and exits
"""

import json
import sys
import time

import epicbox
from llm_sandbox import SandboxSession

import docker

IMAGE = sys.argv[1]
PRINT1 = "print(1)"

client = docker.from_env()
epicbox.configure(
    profiles=[epicbox.Profile("python", IMAGE, user="10001", read_only=True, network_disabled=True)],
)
# epicbox's default limits: 1 s of CPU (its real-time limit is 5x that), 64 MiB.
LIMITS = {"cputime": 1, "memory": 64}
_session = None


def llm_session():
    global _session
    if _session is None:
        # The image is the sandbox image (it has python3 and needs no network); no environment set-up, which would
        # make a venv and install packages from PyPI.
        _session = SandboxSession(
            lang="python",
            image=IMAGE,
            keep_template=True,
            skip_environment_setup=True,
            workdir="/tmp",
            client=client,
        )
        _session.open()
        for _ in range(3):  # its first runs warm caches that later ones reuse
            _session.run(PRINT1)
    return _session


def sample(req):
    side = req["side"]
    if side == "llm_sandbox":
        session = llm_session()
        t0 = time.perf_counter()
        out = session.run(PRINT1)
        took = time.perf_counter() - t0
        if out.exit_code != 0 or out.stdout.strip() != "1":
            raise RuntimeError(f"llm-sandbox: exit {out.exit_code} {out.stdout!r} {out.stderr!r}")
        return took
    if side == "epicbox":
        t0 = time.perf_counter()
        # epicbox 1.1 takes the command as one string.
        out = epicbox.run("python", "python3 -c 'print(1)'", limits=LIMITS)
        took = time.perf_counter() - t0
        if out["exit_code"] != 0 or out["stdout"].strip() != b"1":
            raise RuntimeError(f"epicbox: {out!r}")
        return took
    if side == "docker_run":
        t0 = time.perf_counter()
        out = client.containers.run(IMAGE, ["python3", "-c", PRINT1], runtime=req["runtime"], remove=True, user="10001")
        took = time.perf_counter() - t0
        if out.strip() != b"1":
            raise RuntimeError(f"docker run: {out!r}")
        return took
    raise ValueError(f"unknown side {side!r}")


def main():
    for line in sys.stdin:
        req = json.loads(line)
        if req["side"] == "close":
            break
        try:
            answer = {"ms": sample(req) * 1000}
        except Exception as e:  # noqa: BLE001 - every failure is reported to the bench, which stops
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)
    if _session is not None:
        _session.close()


if __name__ == "__main__":
    main()
