"""Output accounting shared by runs and cells: the per-stream caps, and a cell's boundaries in a kernel's stream.

A kernel's stdout and stderr stay open across cells, so a cell's output is delimited in the streams themselves:
before a cell the kernel writes the cell's start token to both, after it the end token (both random, unknowable to
the code). The bytes between the two belong to the cell, and the token after the cell proves the stream is complete
(pipes keep order). What comes between cells (a timer or a late promise of a node cell, a background job of a bash
cell) is kept, up to LATE_BYTES per stream, and opens the next cell's output.
"""

IDLE, START, CELL, DONE = "idle", "start", "cell", "done"
LATE_BYTES = 64 << 10


class Cap:
    """Forwards at most `cap_bytes` bytes and `cap_lines` + 1 lines of one stream (one line past the cap tells the
    engine it was cut)."""

    def __init__(self, cap_bytes, cap_lines):
        self.cap_bytes = max(1, int(cap_bytes))
        self.cap_lines = max(1, int(cap_lines))
        self.bytes = 0
        self.lines = 0
        self.capped = False

    def take(self, data):
        """The part of `data` to forward, and whether the rest is over the cap (then `capped` is set)."""
        if self.capped:
            return b"", len(data) > 0
        keep = min(len(data), self.cap_bytes - self.bytes) if self.lines <= self.cap_lines else 0
        lines = self.lines
        index = data.find(b"\n")
        while index != -1 and index < keep:
            lines += 1
            if lines >= self.cap_lines + 1:
                keep = index + 1
                break
            index = data.find(b"\n", index + 1)
        over = keep < len(data)
        self.bytes += keep
        self.lines = lines
        if over:
            self.capped = True
        return data[:keep], over


def partial_suffix(data, tokens):
    """Length of the longest end of `data` that is the beginning of one of `tokens` (it may continue later)."""
    longest = 0
    for token in tokens:
        for size in range(min(len(token) - 1, len(data)), longest, -1):
            if data.endswith(token[:size]):
                longest = size
                break
    return longest


class CellStream:
    """One output stream of a kernel, cut at a cell's start and end tokens."""

    def __init__(self):
        self.phase = IDLE
        self.hold = b""
        self.tokens = (b"", b"")
        self.late = bytearray()  # printed between cells, for the next one
        self.late_dropped = 0

    def keep_late(self, data):
        room = max(0, LATE_BYTES - len(self.late))
        self.late += data[:room]
        self.late_dropped += max(0, len(data) - room)

    def take_late(self):
        late = bytes(self.late)
        if self.late_dropped:
            late += b"\n[%d more bytes printed between cells were dropped]\n" % self.late_dropped
        self.late.clear()
        self.late_dropped = 0
        return late

    def begin(self, start, end):
        self.phase = START
        self.tokens = (start, end)
        self.hold = b""

    def reset(self):
        self.phase = IDLE
        self.hold = b""

    @property
    def done(self):
        return self.phase == DONE

    @property
    def started(self):
        """The cell's start token went by (the kernel began the cell)."""
        return self.phase in (CELL, DONE)

    def feed(self, data):
        """The bytes of `data` that belong to the current cell (possibly none), preceded at its start by what came
        between cells; what comes outside a cell is kept for the next one."""
        start, end = self.tokens
        data = self.hold + data
        self.hold = b""
        first = b""
        if self.phase == START:
            at_start, at_end = data.find(start), data.find(end)
            if at_end != -1 and (at_start == -1 or at_end < at_start):
                self.phase = DONE  # the cell ended before it began (interrupted first): no output
                self.keep_late(data[:at_end])
                self.keep_late(data[at_end + len(end) :])
                return b""
            if at_start == -1:
                kept = len(data) - partial_suffix(data, (start, end))
                self.keep_late(data[:kept])
                self.hold = data[kept:]
                return b""
            self.phase = CELL
            self.keep_late(data[:at_start])
            first = self.take_late()
            data = data[at_start + len(start) :]
        if self.phase != CELL:
            self.keep_late(data)
            return b""
        at_end = data.find(end)
        if at_end != -1:
            self.phase = DONE  # what follows the end token was printed after the cell: the next one's
            self.keep_late(data[at_end + len(end) :])
            return first + data[:at_end]
        kept = len(data) - partial_suffix(data, (end,))
        self.hold = data[kept:]
        return first + data[:kept]

    def flush(self):
        """What is held back as a possible token beginning, once no token can follow (the kernel died)."""
        held = self.hold if self.phase == CELL else b""
        self.hold = b""
        return held
