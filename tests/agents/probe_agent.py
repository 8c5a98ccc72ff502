"""A test agent (SDK 2.0, Python): what it does depends on the task's instruction.

- `sdk`: exercises the context API and writes what it saw to `results.json`.
- `fail`: raises ValueError("bad thing").
- `done twice`: calls done(), then runs a command.
- `loop`: spins forever without calling the host.
- `quiet`: runs one command and returns without calling done().
- `net HOST PORT`: tries to open a socket to HOST:PORT, asks the LLM, writes `net.txt`.
"""

import json
import socket
import urllib.request

from term_sdk import Agent, AgentContext, LLM, run


class Probe(Agent):
    def setup(self):
        self.llm = LLM()

    def run(self, ctx: AgentContext):
        words = ctx.instruction.split()
        mode = words[0]
        if mode == "sdk":
            seen = {}
            seen["cd_tmp"] = ctx.shell("cd /tmp && pwd").stdout.strip()
            seen["pwd_after"] = ctx.shell("pwd").stdout.strip()
            r = ctx.shell("sleep 5", timeout=1)
            seen["timeout"] = [r.exit_code, r.stdout, r.stderr, r.timed_out]
            ctx.write("sub/a.txt", "written by the agent\n")
            seen["read"] = ctx.read("sub/a.txt")
            seen["cwd_sub"] = ctx.shell("pwd; cat a.txt", cwd="sub").stdout
            try:
                ctx.read("missing.txt")
                seen["missing"] = "read"
            except OSError as e:
                seen["missing"] = str(e)
            r = ctx.shell("echo out; echo err >&2; exit 3")
            seen["both"] = [r.output, r.exit_code, r.ok]
            r = ctx.shell("pwd", cwd="/nowhere")
            seen["bad_cwd"] = [r.stdout, r.stderr, r.exit_code]
            seen["step"] = ctx.step
            ctx.log("hello from python")
            ctx.write("results.json", json.dumps(seen))
            ctx.done()
        elif mode == "fail":
            raise ValueError("bad thing")
        elif mode == "done":
            ctx.done()
            ctx.shell("echo after done")
        elif mode == "quiet":
            ctx.shell("true")
        elif mode == "loop":
            n = 0
            while True:
                n += 1
        elif mode == "net":
            host, port = words[1], int(words[2])
            seen = {}
            try:
                socket.create_connection((host, port), timeout=3).close()
                seen["socket"] = "connected"
            except Exception as e:
                seen["socket"] = f"{type(e).__name__}: {e}"
            try:
                raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                raw.settimeout(3)
                raw.connect((host, port))
                seen["raw"] = "connected"
            except Exception as e:
                seen["raw"] = f"{type(e).__name__}: {e}"
            try:
                urllib.request.urlopen(f"http://{host}:{port}/", timeout=3)
                seen["urllib"] = "connected"
            except Exception as e:
                seen["urllib"] = f"{type(e).__name__}: {e}"
            seen["llm"] = self.llm.ask("say hi").text
            ctx.write("net.txt", json.dumps(seen))
            ctx.done()


if __name__ == "__main__":
    run(Probe())
