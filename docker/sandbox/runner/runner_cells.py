"""A cell: one piece of code run in a kernel, from its request to its `cell_done`.

It owns the cell's clock: the timeout (an interrupt), the grace after an interrupt that must work (then the kernel
is killed), the wait for its end tokens after the kernel's reply, and when an interrupt may be signalled at all. A
kernel still getting into the cell would drop the signal (node could even die of it: vm's breakOnSigint swaps
node's SIGINT listener for its watchdog around the code), so an interrupt asked for before the cell's start token
waits for it; node and bash then get it as their go-ahead's "no" instead, and in the first moments after a
go-ahead the signal is held back a little. A signal can still be lost on its way into the code (bash between a
fork and the child's exec, node around vm's watchdog, python just before a blocking call), so a cell running on
gets it again: node and bash while the cell runs, python until its kernel acknowledges it.
"""

import secrets

from runner_spawn import now, oom_kills, oom_since
from runner_streams import Cap

# After a cell's reply, how long its end tokens may take (they were written before it: only a kernel whose cell
# closed its own fd 1 or 2 makes this wait).
TOKEN_SECONDS = 0.5
# How long after the go-ahead an interrupt waits, while node or bash get into the cell's code.
SETTLE_SECONDS = 0.05
# After a signalled interrupt, how long the cell may run on before the signal is sent again, and how often. Python
# acknowledges a SIGINT that raised KeyboardInterrupt and gets none after that (a cell handling it must not be
# interrupted twice).
RESEND_SECONDS = 0.4
RESENDS = 5


class Cell:
    def __init__(self, request, count, handshake, acks_sigint=False):
        self.id = request.get("id")
        self.count = count
        self.handshake = handshake  # the kernel waits for a go-ahead after its start token
        self.acks_sigint = acks_sigint  # the kernel says when a SIGINT landed (python): resent only until then
        self.sigint_acked = False
        self.started = now()
        self.deadline = self.started + max(1, int(request.get("timeoutMs", 30000))) / 1000.0
        self.grace = max(0, int(request.get("graceMs", 2000))) / 1000.0
        self.caps = {fd: Cap(request.get("capBytes", 1 << 20), request.get("capLines", 2000)) for fd in (1, 2)}
        # Random, so the code cannot know them and end its output early.
        nonce = secrets.token_hex(12)
        self.start_token, self.end_token = "\x02%s<\x03" % nonce, "\x02%s>\x03" % nonce
        self.ended = None
        self.timed_out = False
        self.kill_at = None  # past it, the interrupt did not work: the kernel is killed
        self.killing = False
        self.begun_at = None  # when the kernel got to it (its start token)
        self.sigint_due = False  # an interrupt asked for before that
        self.sigint_at = None  # an interrupt held back until the kernel settled into the code
        self.resend_at = None  # the interrupt was signalled: when to signal it again if the cell still runs
        self.resends = 0
        self.reply = None
        self.reply_at = None
        self.oom_before = oom_kills()

    @property
    def running(self):
        return self.reply is None

    def interrupt(self, why, escalate):
        """Records an interrupt; True when the signal is to be sent now."""
        if self.ended is None:
            self.ended = why
        if escalate and self.kill_at is None:
            self.kill_at = now() + self.grace
        if self.begun_at is None:
            self.sigint_due = True
            return False
        if self.handshake and now() < self.begun_at + SETTLE_SECONDS:
            self.sigint_at = self.begun_at + SETTLE_SECONDS
            return False
        return True

    def signalled(self):
        """The interrupt's SIGINT went out: it goes again if the cell has not ended (or, python, not said so) by
        then."""
        if (self.handshake or (self.acks_sigint and not self.sigint_acked)) and self.resends < RESENDS:
            self.resend_at = now() + RESEND_SECONDS

    def sigint_landed(self):
        """The kernel acknowledged a SIGINT (python): no more resends."""
        self.sigint_acked = True
        self.resend_at = None

    def begin(self):
        """The kernel wrote the start token. Returns the go-ahead (handshake), or whether to signal now (else)."""
        self.begun_at = now()
        due, self.sigint_due = self.sigint_due, False
        return not due if self.handshake else due

    def deadlines(self):
        if self.reply is not None:
            return [self.reply_at + TOKEN_SECONDS]
        times = [t for t in (self.sigint_at, self.resend_at) if t is not None]
        if not self.timed_out:
            times.append(self.deadline)
        if self.kill_at is not None and not self.killing:
            times.append(self.kill_at)
        return times

    def due(self, t, tokens_in):
        """What is due at `t`: a subset of "finish", "sigint", "resend", "kill" (the timeout's is "timeout")."""
        if self.reply is not None:
            return {"finish"} if tokens_in or t >= self.reply_at + TOKEN_SECONDS else set()
        actions = set()
        if self.sigint_at is not None and t >= self.sigint_at:
            self.sigint_at = None
            actions.add("sigint")
        if self.resend_at is not None and t >= self.resend_at:
            self.resend_at = None
            self.resends += 1
            actions.add("resend")
        if not self.timed_out and t >= self.deadline:
            self.timed_out = True
            actions.add("timeout")
        if self.kill_at is not None and t >= self.kill_at and not self.killing:
            self.killing = True
            actions.add("kill")
        return actions

    def done(self, kernel_id, lost, kernel_exit):
        """The `cell_done` event; `kernel_exit` is the kernel's (exitCode, signal) when it died."""
        reply = self.reply or {}
        return {
            "ev": "cell_done",
            "id": self.id,
            "kernel": kernel_id,
            "count": reply.get("count", self.count),
            "ok": bool(reply.get("ok")),
            "result": reply.get("result"),
            "error": reply.get("error"),
            "exitCode": reply.get("exitCode"),
            "interrupted": bool(reply.get("interrupted")) and not lost,
            "timedOut": self.timed_out,
            "ended": self.ended,
            "capped": {"stdout": self.caps[1].capped, "stderr": self.caps[2].capped},
            "stateLost": lost,
            "oomKilled": oom_since(self.oom_before),
            "kernelExit": {"exitCode": kernel_exit[0], "signal": kernel_exit[1]} if lost else None,
            "durationMs": round((now() - self.started) * 1000, 3),
        }
