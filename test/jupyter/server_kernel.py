"""Drives a kernel through a Jupyter server's own REST API and kernel WebSocket, the path JupyterLab takes.

    server_kernel.py PLAN_JSON

PLAN_JSON: {"server": "http://127.0.0.1:PORT", "token": "T", "kernel": {"name": "python3"} | {"id": "…"},
            "timeout": 60, "steps": [STEP, …]}, each STEP one of
  {"execute": CODE, "interrupt_after": SECONDS?}  an execute_request on the shell channel, read until its reply and
                                                  its `idle`; with interrupt_after, `POST /api/kernels/{id}/interrupt`
                                                  that long after sending it
  {"request": MSG_TYPE, "content": {…}, "channel": "shell"?}
                                                  any other request, read until its reply and its `idle`
  {"restart": true}                               `POST /api/kernels/{id}/restart`
  {"delete": true}                                `DELETE /api/kernels/{id}`
Prints one JSON object: the kernel id and each step's outcome (the reply, and the IOPub messages answering the
request, in order, each with the seconds after the request it arrived). Used by test/e2e/jupyter-gateway.e2e-spec.ts
against `jupyter server --gateway-url=…`.
"""

import json
import sys
import threading
import time
import urllib.request
import uuid

import websocket


def rest(plan, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(plan["server"] + path, data=data, method=method)
    request.add_header("Authorization", "token " + plan["token"])
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=plan.get("timeout", 60)) as response:
        text = response.read().decode()
        return {"status": response.status, "body": json.loads(text) if text else None}


def send(plan, ws, kernel_id, session, step):
    msg_id = uuid.uuid4().hex
    msg_type = step.get("request", "execute_request")
    header = {
        "msg_id": msg_id,
        "msg_type": msg_type,
        "username": "test",
        "session": session,
        "date": "",
        "version": "5.3",
    }
    content = step.get("content", {})
    if msg_type == "execute_request":
        content = {
            "code": step["execute"],
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
    channel = step.get("channel", "shell")
    message = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": channel}
    started = time.monotonic()
    ws.send(json.dumps(message))
    timer = None
    if "interrupt_after" in step:
        timer = threading.Timer(
            step["interrupt_after"], lambda: rest(plan, "POST", f"/api/kernels/{kernel_id}/interrupt", {})
        )
        timer.start()
    reply, iopub, idle = None, [], False
    while reply is None or not idle:
        frame = json.loads(ws.recv())
        if frame.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if frame["channel"] == "iopub":
            iopub.append([frame["msg_type"], frame["content"], round(time.monotonic() - started, 3)])
            idle = idle or (frame["msg_type"] == "status" and frame["content"]["execution_state"] == "idle")
        else:
            reply = {"channel": frame["channel"], "msg_type": frame["msg_type"], "content": frame["content"]}
            reply["metadata"] = frame.get("metadata", {})
            reply["before_idle"] = not idle
            reply["at"] = round(time.monotonic() - started, 3)
    if timer is not None:
        timer.join()
    return {"reply": reply, "iopub": iopub, "seconds": round(time.monotonic() - started, 3)}


def main():
    plan = json.loads(sys.argv[1])
    kernel = plan["kernel"]
    kernel_id = kernel.get("id") or rest(plan, "POST", "/api/kernels", {"name": kernel["name"]})["body"]["id"]
    session = uuid.uuid4().hex
    ws_url = plan["server"].replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?session_id={session}"
    ws = websocket.create_connection(
        ws_url, header={"Authorization": "token " + plan["token"]}, timeout=plan.get("timeout", 60)
    )
    steps = []
    try:
        for step in plan["steps"]:
            if "execute" in step or "request" in step:
                steps.append(send(plan, ws, kernel_id, session, step))
            elif step.get("restart"):
                steps.append(rest(plan, "POST", f"/api/kernels/{kernel_id}/restart", {}))
            elif step.get("delete"):
                steps.append(rest(plan, "DELETE", f"/api/kernels/{kernel_id}"))
    finally:
        ws.close()
    print(json.dumps({"kernel_id": kernel_id, "steps": steps}))


if __name__ == "__main__":
    main()
