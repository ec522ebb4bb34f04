"""Drives a real engine with the installed `switchyard` wheel (test/e2e/python-sdk.e2e-spec.ts runs it in a fresh venv).

SWITCHYARD_URL names the engine. Each section runs on its own and reports what it saw (or the error it raised) in
one JSON object on stdout; the spec asserts on it, so one broken feature does not hide the others.
"""

from __future__ import annotations

import asyncio
import base64
import filecmp
import hashlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import switchyard
from switchyard import AsyncSandbox, InvalidRequestError, NotFoundError, Sandbox

PNG_MAGIC = "89504e470d0a1a0a"
report: dict[str, Any] = {"version": switchyard.__version__, "module": switchyard.__file__}


def section(name: str) -> Callable[[Callable[[], dict[str, Any]]], None]:
    def run(fn: Callable[[], dict[str, Any]]) -> None:
        started = time.monotonic()
        try:
            report[name] = fn()
        except Exception as error:  # noqa: BLE001 - reported for the spec to show
            report[name] = {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-1500:]}
        print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr)

    return run


@section("example")
def example() -> dict[str, Any]:
    # The example, as written there.
    with Sandbox.create(template="data-science") as sbx:
        ex = sbx.run_code("import pandas as pd; df = pd.DataFrame({'x':[1,2]}); df.plot()")
        png = base64.b64decode(ex.results[0].png or "")
        return {
            "template": sbx.session.template,
            "status": ex.action.status,
            "error": None if ex.error is None else ex.error.name,
            "pngMagic": png[:8].hex(),
            "pngBytes": len(png),
            "formats": sorted(ex.results[0].formats()),
            "text": ex.text,
        }


@section("code")
def code() -> dict[str, Any]:
    with Sandbox.create() as sbx:
        first = sbx.run_code("x = 41\nprint('side')\nx + 1")
        second = sbx.run_code("x")
        failed = sbx.run_code("1/0")
        node = sbx.run_code("console.log(6 * 7)", language="node", state="fresh")
        return {
            "text": first.text,
            "stdout": first.logs.stdout,
            "kept": second.text,
            "error": [failed.error.name, failed.error.value] if failed.error else None,
            "node": node.logs.stdout,
        }


@section("files")
def files() -> dict[str, Any]:
    with Sandbox.create() as sbx, tempfile.TemporaryDirectory() as tmp:
        data = os.urandom(5 * 1024 * 1024 + 123)
        local = Path(tmp, "big.bin")
        local.write_bytes(data)
        with open(local, "rb") as f:
            info = sbx.files.write("data/big.bin", f)
        back = sbx.files.read("data/big.bin", format="bytes")
        streamed = hashlib.sha256()
        for chunk in sbx.files.read("data/big.bin", format="stream"):
            streamed.update(chunk)
        sbx.files.write("notes/hello.txt", "héllo\n")
        listing = sorted((e.path, e.type) for e in sbx.files.list("notes"))
        try:
            sbx.files.write("notes/hello.txt", "again", overwrite=False)
            exists_error = None
        except switchyard.ConflictError as error:
            exists_error = error.code
        try:
            sbx.files.read("nope.txt")
            missing = None
        except NotFoundError as error:
            missing = error.code
        want = hashlib.sha256(data).hexdigest()
        return {
            "size": info.size == len(data),
            "sha256Answer": info.sha256 == want,
            "sha256Read": hashlib.sha256(back).hexdigest() == want,
            "sha256Stream": streamed.hexdigest() == want,
            "text": sbx.files.read("notes/hello.txt"),
            "listing": listing,
            "existsError": exists_error,
            "missing": missing,
            "inSandbox": sbx.commands.run("sha256sum data/big.bin").stdout.split()[0] == want,
        }


@section("directories")
def directories() -> dict[str, Any]:
    with Sandbox.create() as sbx, tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "project")
        (src / "pkg" / "sub").mkdir(parents=True)
        (src / "README.md").write_text("# project\n")
        (src / "pkg" / "mod.py").write_text("VALUE = 1\n")
        (src / "pkg" / "sub" / "blob.bin").write_bytes(os.urandom(300_000))
        uploaded = sbx.files.upload(src, "proj")
        seen = sbx.commands.run("find proj -type f | sort").stdout.split()
        sbx.files.write("proj/made-there.txt", "from the sandbox\n")
        out = Path(tmp, "back")
        sbx.files.download("proj", out)
        compare = filecmp.dircmp(src, out)
        single = Path(tmp, "single", "mod.py")
        sbx.files.download("proj/pkg/mod.py", single)
        return {
            "files": getattr(uploaded, "files", None),
            "inSandbox": seen,
            "sameTree": not compare.diff_files and not compare.left_only and not compare.funny_files,
            "blobSame": filecmp.cmp(src / "pkg" / "sub" / "blob.bin", out / "pkg" / "sub" / "blob.bin", shallow=False),
            "extra": (out / "made-there.txt").read_text(),
            "single": single.read_text(),
        }


@section("commands")
def commands() -> dict[str, Any]:
    with Sandbox.create() as sbx:
        fg = sbx.commands.run("echo out; echo err >&2; exit 3", cwd=None)
        sbx.files.make_dir("work")
        cwd = sbx.commands.run("pwd", cwd="work", env={"GREETING": "hi"})
        chunks: list[str] = []
        handle = sbx.commands.run(
            "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo done >&2",
            background=True,
            on_stdout=chunks.append,
        )
        result = handle.wait(timeout=60)
        sleeper = sbx.commands.run("sleep 300", background=True, name="sleeper")
        running = [p.name for p in sbx.commands.list() if p.running]
        killed = sleeper.kill(grace_ms=0)
        return {
            "foreground": [fg.exit_code, fg.stdout, fg.stderr],
            "cwd": cwd.stdout.strip().endswith("/work"),
            "callbacks": "".join(chunks),
            "background": [result.exit_code, result.stdout, result.stderr],
            "logs": handle.logs().stdout,
            "running": running,
            "killed": killed.running,
        }


@section("checkpoints")
def checkpoints() -> dict[str, Any]:
    with Sandbox.create() as sbx:
        sbx.files.write("state.txt", "before")
        cp = sbx.checkpoint("before")
        sbx.files.write("state.txt", "after")
        sbx.files.write("later.txt", "x")
        restored = sbx.restore(cp)
        child = sbx.fork()
        try:
            in_child = child.files.read("state.txt")
            child.files.write("state.txt", "child")
        finally:
            child.kill()
        return {
            "killedAgain": child.kill(),
            "label": cp.label,
            "restored": sbx.files.read("state.txt"),
            "removed": restored.restored.get("removed"),
            "laterGone": not sbx.files.exists("later.txt"),
            "inChild": in_child,
            "parentUntouched": sbx.files.read("state.txt"),
            "listed": [c.label for c in sbx.checkpoints()],
        }


@section("errors")
def errors() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        Sandbox.connect("ses_does_not_exist")
    except NotFoundError as error:
        out["notFound"] = [error.status, error.code]
    try:
        Sandbox.create(ttl_seconds=0)
    except InvalidRequestError as error:
        out["invalid"] = [error.status, error.code, error.field]
    with Sandbox.create() as sbx:
        try:
            sbx.actions.run({"type": "code", "language": "cobol", "code": "x"})
        except InvalidRequestError as error:
            out["action"] = [error.status, error.field]
    try:
        Sandbox.create(base_url="http://127.0.0.1:9")
    except switchyard.ConnectionFailedError as error:
        out["connection"] = [error.status, error.code]
    return out


@section("events")
def events() -> dict[str, Any]:
    with Sandbox.create() as sbx:
        sbx.run_code("print('evented')", state="fresh")
        cp = sbx.checkpoint("evented")
        seen: list[str] = []
        output = ""
        with sbx.events() as stream:
            for event in stream:
                seen.append(event.type)
                if event.type == "action.output":
                    output += str(event.data.get("chunk", ""))
                if event.type == "checkpoint.created" and event.data.get("checkpointId") == cp.id:
                    break
        return {"types": sorted(set(seen)), "output": output}


@section("adapters")
def adapters() -> dict[str, Any]:
    from agents.tool_context import ToolContext

    from switchyard.integrations.langchain import structured_tools
    from switchyard.integrations.openai_agents import function_tools

    with Sandbox.create() as sbx:
        tools = function_tools(sbx)
        bash = next(t for t in tools if t.name == "bash")
        # Strict mode: the model sends every field, null for the ones it leaves out.
        arguments = json.dumps({**dict.fromkeys(bash.params_json_schema["properties"]), "command": "echo agents"})
        ctx = ToolContext(context=None, tool_name="bash", tool_call_id="call_1", tool_arguments=arguments)
        agents_answer = asyncio.run(bash.on_invoke_tool(ctx, arguments))
        lc = {t.name: t for t in structured_tools(sbx)}
        lc_answer = lc["bash"].invoke({"command": "echo langchain > lc.txt && cat lc.txt"})
        read_answer = lc["read"].invoke({"path": "lc.txt"})
        return {
            "agentsTools": len(tools),
            "strict": bash.strict_json_schema,
            "agents": agents_answer,
            "langchain": lc_answer,
            "read": read_answer,
        }


@section("async")
def async_client() -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with await AsyncSandbox.create() as sbx:
            ex = await sbx.run_code("y = 2\ny * 21")
            data = os.urandom(1024 * 1024)
            info = await sbx.files.write("a.bin", data)
            back = await sbx.files.read("a.bin", format="bytes")
            chunks: list[str] = []
            handle = await sbx.commands.run("echo async; sleep 0.1; echo end", background=True, on_stdout=chunks.append)
            result = await handle.wait(timeout=60)
            types: list[str] = []
            stream = sbx.events()
            async for event in stream:
                types.append(event.type)
                if event.type == "process.exited":
                    break
            await stream.aclose()
            try:
                await AsyncSandbox.connect("ses_missing_async", client=sbx.client)
                missing = None
            except NotFoundError as error:
                missing = error.code
            return {
                "text": ex.text,
                "sha": info.sha256 == hashlib.sha256(data).hexdigest() and back == data,
                "callbacks": "".join(chunks),
                "exit": result.exit_code,
                "events": "process.output" in types and "action.completed" in types,
                "missing": missing,
            }

    return asyncio.run(main())


print(json.dumps(report))
