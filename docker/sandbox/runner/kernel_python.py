"""Switchyard python kernel: one interpreter state kept across a session's cells. Stdlib only.

Started by the runner as `python3 -u kernel_python.py` with fd 3 reading requests (a 4-byte big-endian length, then
`marshal.dumps` of the request) and fd 4 writing replies, one JSON object per line; fds 1 and 2 are the cell output
(so child processes' output is captured too), fd 0 is /dev/null. It imports nothing costly before its first cell (no
json, ast, traceback or linecache: marshal and _ast are built in), so a kernel starts about as fast as `python3`.

  runner -> kernel (fd 3)   {"cell": N, "code": str, "env": {str: str}, "start": str, "end": str,
                             "results": {"maxBytes": int, "cellMaxBytes": int}}
  kernel -> runner (fd 4)   {"ev": "ready", "pid": int}                                   once, at start
                            {"ev": "display", "cell": N, "result": {…}}   each rich result (kernel_display.py)
                            {"cell": N, "count": int, "ok": bool, "result": str|null, "exitCode": int,
                             "error": null|{"name": str, "message": str}, "interrupted": bool}

`env` is applied to os.environ first (it persists). The kernel writes the cell's `start` token to stdout and stderr,
runs the cell, flushes, writes the `end` token to both, then replies: the runner takes what lies between the tokens
as the cell's output. A cell runs in one globals dict kept for the kernel's life; when its last statement is an
expression, its repr is the cell's `result` (None gives none), as in a notebook. An exception prints its traceback
(the cell's frames, not the kernel's) on stderr; exit()/sys.exit() ends the cell, not the kernel (os._exit does end
it: the runner reports the state lost). Top-level `await` works: such a cell runs in one asyncio event loop kept for
the kernel's life, so a task it starts without awaiting runs on whenever a later cell awaits.

Rich results (kernel_display.py): `display()` is a builtin, as in IPython; the final expression's value is also sent
as the cell's main result (its MIME bundle: `_repr_html_`, `_repr_png_`… and text/plain); matplotlib draws with the
inline backend and the figures still open when a cell ends are shown as PNGs.

SIGINT (the runner's interrupt) raises KeyboardInterrupt in the running cell, which ends it and keeps the state;
between cells it is ignored. One that lands in a cell is acknowledged at once on fd 4 (`{"ev": "sigint"}`): until
then the runner sends it again.
"""

import _ast
import builtins
import marshal
import os
import signal
import sys

import kernel_display  # from this directory: sys.path[0] is still it

REQUESTS_FD = 3
REPLIES_FD = 4
in_cell = False


def on_sigint(_signum, _frame):
    if in_cell:
        # Tell the runner it landed: a SIGINT that came just before a blocking call (time.sleep checks for signals
        # only once woken) is lost, and the runner sends it again until it hears this.
        write_fd(REPLIES_FD, b'{"ev":"sigint"}\n')
        raise KeyboardInterrupt


def leave_cell():
    """From here on SIGINT is ignored; one that lands while getting here is absorbed."""
    global in_cell
    while True:
        try:
            in_cell = False
            return
        except KeyboardInterrupt:
            continue


def write_fd(fd, data):
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the cell closed or redirected it: the runner stops waiting after a while


def to_json(value):
    """JSON of a reply: dicts, strings, ints, booleans and None are all a reply holds."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(to_json(str(k)) + ":" + to_json(v) for k, v in value.items()) + "}"
    text = str(value)
    return '"' + text.translate(JSON_ESCAPES) + '"'


JSON_ESCAPES = {c: "\\u%04x" % c for c in range(32)}
JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def reply(message):
    # A lone surrogate (an exception message may hold one; a repr escapes them) cannot be UTF-8: it becomes "?".
    write_fd(REPLIES_FD, (to_json(message) + "\n").encode("utf-8", "replace"))


SOURCES = {}  # cell file name -> source, for tracebacks (given to linecache once something imports it)
shared_with_linecache = 0


def share_sources():
    """Tracebacks show the cells' lines: linecache learns them, as soon as something (traceback) has imported it."""
    global shared_with_linecache
    linecache = sys.modules.get("linecache")
    if linecache is None or shared_with_linecache == len(SOURCES):
        return
    for filename, code in SOURCES.items():
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    shared_with_linecache = len(SOURCES)


def show_exception(exc):
    """Prints the traceback without this file's frames: the user sees their own code only."""
    own = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != __file__:
            own.append(tb)
        tb = tb.tb_next
    # None of the user's (a SyntaxError): nothing to relink.
    for i, frame in enumerate(own):
        frame.tb_next = own[i + 1] if i + 1 < len(own) else None
    import traceback  # only now: most kernels never need it

    share_sources()
    traceback.print_exception(type(exc), exc, own[0] if own else None)


def failed(exc, exit_code=1, interrupted=False):
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not take the kernel down
        message = "<unprintable %s>" % type(exc).__name__
    return {
        "ok": False,
        "result": None,
        "error": {"name": type(exc).__name__, "message": message},
        "exitCode": exit_code,
        "interrupted": interrupted,
    }


def run_cell(namespace, count, code, start):
    global in_cell
    filename = "<cell %d>" % count
    SOURCES[filename] = code
    share_sources()
    try:
        # From the start token on, SIGINT interrupts the cell (the runner sends none before it saw that token).
        in_cell = True
        for fd in (1, 2):
            write_fd(fd, start)
        flags = _ast.PyCF_ONLY_AST | PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, filename, "exec", flags)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = compile(_ast.Expression(tree.body.pop().value), filename, "eval", PyCF_ALLOW_TOP_LEVEL_AWAIT)
        body = compile(tree, filename, "exec", PyCF_ALLOW_TOP_LEVEL_AWAIT)
        awaited(eval(body, namespace))
        value = awaited(eval(last, namespace)) if last is not None else None
        result = None if value is None else repr(value)
        if value is not None:
            shown_as_result(value, result)
        leave_cell()
        return {"ok": True, "result": result, "error": None, "exitCode": 0, "interrupted": False}
    except KeyboardInterrupt as exc:
        leave_cell()
        show_exception(exc)
        return failed(exc, interrupted=True)
    except SystemExit as exc:
        leave_cell()
        if exc.code is None or exc.code == 0:
            return {"ok": True, "result": None, "error": None, "exitCode": 0, "interrupted": False}
        if isinstance(exc.code, int):
            return failed(exc, exit_code=exc.code)
        print(exc.code, file=sys.stderr)  # as the interpreter does for sys.exit("message")
        return failed(exc)
    except BaseException as exc:  # noqa: BLE001 - a cell may raise anything; the kernel survives it
        leave_cell()
        show_exception(exc)
        return failed(exc)


# Top-level `await` in a cell (as in `python -m asyncio` and IPython): code that awaits compiles to a coroutine.
PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
CO_COROUTINE = 0x80
event_loop = None  # one for the kernel's life, so tasks a cell starts live on (they run while a later cell awaits)


def awaited(result):
    """A top-level-await cell's coroutine run to its end in the kernel's event loop; anything else as it is."""
    frame = getattr(result, "cr_frame", None)
    if frame is None or not frame.f_code.co_flags & CO_COROUTINE or not frame.f_code.co_filename.startswith("<cell"):
        return result
    global event_loop
    import asyncio  # only now: most kernels never need it

    if event_loop is None or event_loop.is_closed():
        event_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(event_loop)
    return event_loop.run_until_complete(result)


def shown_as_result(value, text):
    """The final expression's MIME bundle; a formatter that fails costs the rich result, never the cell."""
    try:
        kernel_display.main_result(value, text)
    except Exception as exc:  # noqa: BLE001
        print("display: the result could not be formatted: %r" % exc, file=sys.stderr)


def show_open_figures():
    if "matplotlib.pyplot" in sys.modules:
        try:
            kernel_display.show_figures()
        except BaseException as exc:  # noqa: BLE001 - an interrupt while drawing ends the drawing only
            print("display: the figures could not be shown: %r" % exc, file=sys.stderr)


def flush_streams():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def main():
    signal.signal(signal.SIGINT, on_sigint)
    workspace = os.getcwd()
    kernel_display.install()
    builtins.display = kernel_display.display
    for fd in (REQUESTS_FD, REPLIES_FD):
        os.set_inheritable(fd, False)  # the cell's child processes do not get them
    sys.argv = [""]
    sys.path[0] = ""  # as in the interactive interpreter: imports from the current directory, not from here
    requests = os.fdopen(REQUESTS_FD, "rb")

    def next_request():
        head = requests.read(4)
        if len(head) < 4:
            return None  # the runner went away
        size = int.from_bytes(head, "big")
        frame = requests.read(size)
        return marshal.loads(frame) if len(frame) == size else None

    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
    count = 0
    reply({"ev": "ready", "pid": os.getpid()})
    while True:
        try:
            request = next_request()
        except (ValueError, EOFError, TypeError):
            return  # not the protocol: nothing more can be read in step
        if request is None:
            return
        count += 1
        os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        kernel_display.use_inline_backend()
        kernel_display.begin(request.get("cell"), count, request.get("results"), workspace)
        start = str(request.get("start", "")).encode("utf-8")
        try:
            outcome = run_cell(namespace, count, str(request.get("code", "")), start)
        except KeyboardInterrupt as exc:  # a second interrupt, while the cell was ending
            leave_cell()
            outcome = failed(exc, interrupted=True)
        show_open_figures()
        flush_streams()
        for fd in (1, 2):
            write_fd(fd, str(request.get("end", "")).encode("utf-8"))
        reply({"cell": request.get("cell"), "count": count, **outcome})


if __name__ == "__main__":
    main()
