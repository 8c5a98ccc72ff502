"""A test agent of term SDK 1.x (term1) in Python: creates hello.txt, lets the LLM pick the next step
(the test's proxy answers in the legacy Terminal-Bench shape), then finishes, reporting how
many commands it saw (its state lives across steps)."""

from term_sdk import Agent, LLM, Request, Response, run


class EchoAgent(Agent):
    def setup(self):
        self.llm = LLM()
        self.seen = []

    def solve(self, req: Request) -> Response:
        if req.first:
            return Response.cmd("echo 'Hello, world!' > hello.txt", text="creating the file")
        self.seen.append(req.last_command)
        if "boom" in req.instruction:
            raise RuntimeError("boom")
        if req.step == 2:
            return Response.from_llm(self.llm.ask(f"{req.instruction}\n{req.get_output()}").text)
        return Response.done(f"saw {len(self.seen)} commands, last output {req.output!r}")


if __name__ == "__main__":
    run(EchoAgent())
