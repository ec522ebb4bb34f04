"""Rich results of a python kernel's cells: what `display()`, IPython-style `_repr_*_` methods and matplotlib show.

Imported by kernel_python.py at start (it imports nothing costly itself: base64, json and io only once a cell
displays something richer than text). A cell's results go to the runner on fd 4 as they are produced, one line each:

  kernel -> runner (fd 4)   {"ev": "display", "cell": N, "result": {"data": {mime: value}, "metadata": {…},
                              "isMainResult": true?, "files": [{"mimeType", "path", "bytes"}]?}}

`data` holds Jupyter's MIME bundle: text types as strings, image/png and image/jpeg as base64, application/json as a
JSON value; `text/plain` is always there. `isMainResult` marks the cell's final expression (Jupyter's
execute_result). A bundle over the cell's caps (`results.maxBytes` per result, `results.cellMaxBytes` per cell, both
from the cell request) is not cut: its biggest entries are written to the workspace (`.switchyard/results/`), and
`files` names them; `text/plain` then says where they went.

matplotlib: the kernel uses the backend `module://switchyard_mpl_inline` (Agg, whose show() displays), and every
figure still open at the end of a cell is displayed as a PNG and closed, as IPython's inline backend does.
"""

import os
import sys

REPLIES_FD = 4
RESULTS_DIR = os.path.join(".switchyard", "results")
INLINE_BACKEND = "module://switchyard_mpl_inline"
# The methods IPython's formatters call, in the order a bundle lists them.
REPR_METHODS = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
)
BINARY = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
EXTENSIONS = {
    "text/plain": "txt",
    "image/svg+xml": "svg",
    "text/html": "html",
    "text/markdown": "md",
    "text/latex": "tex",
    "application/json": "json",
    "application/javascript": "js",
}

# The running cell: set by begin() (kernel_python.py) before its code runs.
cell = {"id": None, "count": 0, "max": 1 << 20, "cellMax": 4 << 20, "used": 0, "n": 0, "workspace": os.getcwd()}


def begin(cell_id, count, limits, workspace):
    limits = limits if isinstance(limits, dict) else {}
    cell.update(id=cell_id, count=count, used=0, n=0, workspace=workspace)
    for key in ("maxBytes", "cellMaxBytes"):
        value = limits.get(key)
        if isinstance(value, int) and value > 0:
            cell["max" if key == "maxBytes" else "cellMax"] = value


def write_fd(data):
    try:
        while data:
            data = data[os.write(REPLIES_FD, data) :]
    except OSError:
        pass


def safe_repr(obj):
    try:
        return repr(obj)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not end the cell's display
        return "<%s object (repr failed: %s)>" % (type(obj).__name__, type(exc).__name__)


# -- MIME bundles -------------------------------------------------------------------------------------------------


def split_md(value):
    """A `_repr_*_` answer may be (data, metadata)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return value
    return value, None


def is_figure(obj):
    kind = type(obj)
    return kind.__module__.startswith("matplotlib.") and kind.__name__ == "Figure" and hasattr(obj, "savefig")


def figure_png(fig):
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def bundle_of(obj, include=None, exclude=None, text=None):
    """(data, metadata) for an object, as IPython's display formatters would give them; data values still raw.
    `text`: its repr when the caller has it already (a DataFrame's takes milliseconds)."""
    data, metadata = {}, {}
    if isinstance(obj, type):
        return {"text/plain": safe_repr(obj)}, {}
    if is_figure(obj):
        data["image/png"] = figure_png(obj)
    method = getattr(type(obj), "_repr_mimebundle_", None)
    if method is not None:
        try:
            got, got_md = split_md(method(obj, include=include, exclude=exclude))
            if isinstance(got, dict):
                data.update(got)
            if isinstance(got_md, dict):
                metadata.update(got_md)
        except Exception as exc:  # noqa: BLE001 - a failing formatter is reported, the rest still shown
            print("display: %s._repr_mimebundle_ failed: %r" % (type(obj).__name__, exc), file=sys.stderr)
    for mime, name in REPR_METHODS:
        if mime in data or getattr(type(obj), name, None) is None:
            continue
        try:
            value, md = split_md(getattr(obj, name)())
        except Exception as exc:  # noqa: BLE001
            print("display: %s.%s failed: %r" % (type(obj).__name__, name, exc), file=sys.stderr)
            continue
        if value is None:
            continue
        data[mime] = value
        if isinstance(md, dict):
            metadata[mime] = md
    if "text/plain" not in data:
        data["text/plain"] = safe_repr(obj) if text is None else text
    keep = [m for m in data if (include is None or m in include) and (exclude is None or m not in exclude)]
    return {m: data[m] for m in keep or ["text/plain"]}, metadata


def png_size(raw):
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR":
        return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
    return None


def encoded(data, metadata):
    """The bundle's values as they travel (base64 for binary types), their sizes, and image sizes added."""
    out, sizes = {}, {}
    for mime, value in data.items():
        if mime in BINARY:
            if isinstance(value, str):  # already base64, as IPython accepts it
                import base64

                try:
                    value = base64.b64decode(value)
                except ValueError:
                    value = value.encode("utf-8")
            raw = bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else str(value).encode()
            sizes[mime] = len(raw)
            out[mime] = raw
            size = png_size(raw) if mime == "image/png" else None
            if size and not isinstance(metadata.get(mime), dict):
                metadata[mime] = {"width": size[0], "height": size[1]}
        elif mime == "application/json" or mime.endswith("+json"):
            import json

            try:
                text = json.dumps(value)
            except (TypeError, ValueError):
                value, text = safe_repr(value), json.dumps(safe_repr(value))
            sizes[mime] = len(text)
            out[mime] = value
        else:
            text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
            sizes[mime] = len(text.encode("utf-8", "replace"))
            out[mime] = text
    return out, sizes


def spill(out, sizes):
    """Entries written to the workspace, biggest first, until the bundle fits the caps; their `files` entries."""
    files = []
    room = min(cell["max"], max(cell["cellMax"] - cell["used"], 0))
    for mime in sorted(sizes, key=lambda m: sizes[m], reverse=True):
        if sum(sizes.values()) <= room:
            break
        value = out.pop(mime)
        size = sizes.pop(mime)
        path = os.path.join(
            RESULTS_DIR, "cell-%d-%d-%s.%s" % (cell["count"], cell["n"], os.urandom(3).hex(), ext(mime))
        )
        try:
            write_result(path, mime, value)
            files.append({"mimeType": mime, "path": path, "bytes": size})
        except OSError as err:
            files.append({"mimeType": mime, "path": None, "bytes": size, "error": err.strerror or str(err)})
    if "text/plain" not in out:
        lines = []
        for f in files:
            where = "written to %s" % f["path"] if f["path"] else "not kept (%s)" % f.get("error")
            lines.append("[%s of %d bytes %s]" % (f["mimeType"], f["bytes"], where))
        out["text/plain"] = "\n".join(lines)
        sizes["text/plain"] = len(out["text/plain"])
    return files


def ext(mime):
    return BINARY.get(mime) or EXTENSIONS.get(mime) or "bin"


def write_result(path, mime, value):
    full = os.path.join(cell["workspace"], path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if mime in BINARY:
        raw = value
    elif mime == "application/json" or mime.endswith("+json"):
        import json

        raw = json.dumps(value).encode("utf-8")
    else:
        raw = value.encode("utf-8", "replace")
    with open(full, "wb") as f:
        f.write(raw)


def emit(data, metadata, main=False):
    md = dict(metadata or {})
    out, sizes = encoded(data, md)  # adds image sizes to md
    files = spill(out, sizes)
    cell["used"] += sum(sizes.values())
    cell["n"] += 1
    if any(m in BINARY for m in out):
        import base64

        out = {m: base64.b64encode(v).decode("ascii") if m in BINARY else v for m, v in out.items()}
    result = {"data": out}
    if md:
        result["metadata"] = md
    if main:
        result["isMainResult"] = True
    if files:
        result["files"] = files
    write_fd(encode({"ev": "display", "cell": cell["id"], "result": result}))


def encode(message):
    import json

    try:
        text = json.dumps(message, ensure_ascii=False, default=safe_repr)
    except ValueError:  # a circular application/json value
        result = message["result"]
        result["data"] = {m: v for m, v in result["data"].items() if isinstance(v, str)}
        text = json.dumps(message, ensure_ascii=False)
    return (text + "\n").encode("utf-8", "replace")


# -- what cells call ----------------------------------------------------------------------------------------------


def display(*objs, include=None, exclude=None, metadata=None, raw=False, **_ignored):
    """Shows each object as a rich result of the cell (as IPython's display(); `raw=True`: objects are bundles)."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            data, md = obj, {}
        else:
            data, md = bundle_of(obj, include, exclude)
        if metadata:
            md = {**md, **metadata}
        emit(data, md)
        if is_figure(obj):
            close_figure(obj)


def main_result(value, text=None):
    """The cell's final expression: its bundle, marked; a figure shown this way is not shown again at cell end."""
    data, md = bundle_of(value, text=text)
    emit(data, md, main=True)
    if is_figure(value):
        close_figure(value)


def close_figure(fig):
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        try:
            pyplot.close(fig)
        except Exception:  # noqa: BLE001, S110 - closing is housekeeping
            pass


def show_figures():
    """Every open pyplot figure as a PNG, then closed (plt.show(), and the end of every cell)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        figures = [pyplot.figure(n) for n in pyplot.get_fignums()]
    except Exception:  # noqa: BLE001 - a broken pyplot state: nothing to show
        return
    for fig in figures:
        try:
            emit({"image/png": figure_png(fig), "text/plain": safe_repr(fig)}, {})
        except Exception as exc:  # noqa: BLE001
            print("display: a figure could not be drawn: %r" % exc, file=sys.stderr)
    try:
        pyplot.close("all")
    except Exception:  # noqa: BLE001, S110
        pass


class InlineBackendFinder:
    """Finds `switchyard_mpl_inline` (this directory's backend) without putting this directory on sys.path."""

    @staticmethod
    def find_spec(name, _path=None, _target=None):
        if name != "switchyard_mpl_inline":
            return None
        import importlib.util

        here = os.path.dirname(os.path.realpath(__file__))
        return importlib.util.spec_from_file_location(name, os.path.join(here, "switchyard_mpl_inline.py"))


def use_inline_backend():
    """MPLBACKEND names the inline backend unless the cell's environment chose another than Agg."""
    if os.environ.get("MPLBACKEND", "").lower() in ("", "agg"):
        os.environ["MPLBACKEND"] = INLINE_BACKEND


def install():
    sys.meta_path.append(InlineBackendFinder)
    use_inline_backend()
