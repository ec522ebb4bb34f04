"""Resync: a new engine takes over a live runner whose engine went away (a Kubernetes session pod adopted by a
restarted engine or another replica), keeping its kernels and background processes.

Whatever belonged to the old connection ends first: the fresh run (its action is `interrupted` on the engine's side)
is killed, a cell in flight is interrupted (its kernel's state is kept), terminals are hung up, tunnels closed (their
engine-side ends are gone) and the runs' call sockets removed (the box's egress channel stays). Once the run and the
cells have ended (at most WAIT_SECONDS), the runner answers `resynced` with the request's nonce and what lives on: the
engine discards everything it read before that answer (half a line of the old stream, late answers to the old
engine's requests) and numbers its own requests far above the old ones, so nothing of the old connection can be taken
for an answer to the new one.
"""

import os

from runner_spawn import WORKSPACE, RequestError, now

WAIT_SECONDS = 3.0
MAX_NONCE = 128


class Resync:
    def __init__(self, runner, protocol):
        self.runner = runner
        self.protocol = protocol
        self.waiting = []  # (request, deadline): answered once the old connection's run and cells ended

    def request(self, request):
        nonce = request.get("nonce")
        if not isinstance(nonce, str) or not 0 < len(nonce) <= MAX_NONCE:
            raise RequestError(None, "resync needs a nonce of 1 to %d characters" % MAX_NONCE)
        runner = self.runner
        if runner.runs.active:
            runner.runs.stop("kill")
        for kernel in list(runner.kernels.table.values()):
            if not kernel.alive:
                continue
            if not kernel.ready:
                # Its start was the old engine's, which will never hear of it: it goes.
                runner.kernels.stop({"kernel": kernel.id, "id": None})
            elif kernel.cell is not None and kernel.cell.ended is None:
                runner.kernels.signal_cell(kernel, "interrupt", escalate=False)
        for term in list(runner.terms.table.values()):
            if term.exit is None:
                runner.terms.close({"term": term.id, "id": None})
        runner.tunnels.shutdown()
        runner.channels.drop_calls()
        self.waiting.append((request, now() + WAIT_SECONDS))
        self.tick()

    def settled(self):
        kernels = self.runner.kernels.table.values()
        return not self.runner.runs.active and not any(k.alive and k.cell is not None for k in kernels)

    def timeout(self):
        return 0.05 if self.waiting else None

    def tick(self):
        if not self.waiting:
            return
        settled = self.settled()
        t = now()
        for request, deadline in list(self.waiting):
            if settled or t >= deadline:
                self.waiting.remove((request, deadline))
                self.answer(request)

    def answer(self, request):
        runner = self.runner
        kernels = [
            {
                "kernel": k.id,
                "language": k.language,
                "pid": k.pid,
                "count": k.count,
                "busy": k.cell is not None,
                "meta": k.meta,
            }
            for k in runner.kernels.table.values()
            if k.alive and k.ready
        ]
        procs = [{"proc": p.id, "pid": p.pid, "meta": p.meta} for p in runner.procs.table.values() if p.exit is None]
        message = {
            "ev": "resynced",
            "id": request.get("id"),
            "nonce": request.get("nonce"),
            "protocol": self.protocol,
            "pid": os.getpid(),
            "kernels": kernels,
            "procs": procs,
        }
        try:
            st = os.stat(WORKSPACE)
            message["workspace"] = [st.st_dev, st.st_ino]
        except OSError as err:
            message["error"] = str(err)
        runner.send(message)

    def shutdown(self):
        pass
