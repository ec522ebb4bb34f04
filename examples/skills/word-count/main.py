def main(input, ctx):
    # The file is read through the engine's `read` tool: its own action, linked to this one by CALLED_BY.
    read = ctx.call("read", {"path": input["path"]})
    if read["status"] != "succeeded":
        raise RuntimeError("cannot read %s: %s" % (input["path"], read["error"]["message"]))
    text = read["output"]["content"]
    return {"lines": len(text.splitlines()), "words": len(text.split())}
