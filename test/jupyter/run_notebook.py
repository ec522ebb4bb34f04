"""Executes a notebook with nbclient against a Switchyard session, through jupyter_server's GatewayKernelManager.

    run_notebook.py --url http://127.0.0.1:PORT/v1/sessions/SID/jupyter --token KEY --notebook NB.ipynb [--out OUT]

The gateway client is configured as a user would configure it (`GatewayClient.instance(url=…, auth_token=…)`) and
the notebook runs with `allow_errors`. Prints one JSON object: whether the executed notebook is valid nbformat, and
each cell's execution count and outputs (their MIME types, text, errors, the size of a PNG). Used by
test/e2e/jupyter-gateway.e2e-spec.ts.
"""

import argparse
import base64
import json

import nbformat
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
from nbclient import NotebookClient


def summary(output):
    kind = output["output_type"]
    out = {"output_type": kind}
    if kind == "stream":
        out.update(name=output["name"], text=output["text"])
    elif kind == "error":
        out.update(ename=output["ename"], evalue=output["evalue"], traceback=output["traceback"])
    else:
        data = output.get("data", {})
        out["mimes"] = sorted(data)
        out["text"] = data.get("text/plain", "")
        if "text/html" in data:
            out["html"] = data["text/html"][:4000]
        if "image/png" in data:
            png = base64.b64decode(data["image/png"])
            out["png"] = {"bytes": len(png), "signature": png[:8].hex()}
        if kind == "execute_result":
            out["execution_count"] = output.get("execution_count")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", default="")
    parser.add_argument("--notebook", required=True)
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args()

    GatewayClient.instance(url=args.url, auth_token=args.token)
    nb = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(
        nb,
        kernel_manager_class=GatewayKernelManager,
        allow_errors=True,
        timeout=args.timeout,
        startup_timeout=60,
    )
    client.execute()
    if args.out:
        nbformat.write(nb, args.out)
    try:
        nbformat.validate(nb)
        valid = True
    except nbformat.ValidationError as err:
        valid = str(err)
    cells = [
        {
            "id": cell.get("id"),
            "cell_type": cell.cell_type,
            "execution_count": cell.get("execution_count"),
            "outputs": [summary(o) for o in cell.get("outputs", [])],
        }
        for cell in nb.cells
    ]
    print(json.dumps({"valid": valid, "cells": cells}))


if __name__ == "__main__":
    main()
