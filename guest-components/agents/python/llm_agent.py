"""An example term agent in Python (SDK 2.0), the same policy as the Rust `llm-agent`:
send the instruction and the recent history to the LLM, read its reply as
{"command": str|null, "task_complete": bool}, run the command, stop when complete.

Build and serve it:
    wasbox term build llm_agent.py -o llm_agent.wasm
    wasbox agent serve llm_agent.wasm --workdir /path/to/task
"""

from term_sdk import Agent, AgentContext, LLM, LLMError, run

SYSTEM = (
    "You are an agent solving a task in a Linux shell. The working directory is the task "
    "directory. Each turn, answer with one JSON object and nothing else:\n"
    '{"command": "<one shell command to run next, or null>", "task_complete": <true|false>}\n'
    "You will see each command's output and exit code. Set task_complete to true once the "
    "task is done (you may give a last command with it)."
)
HISTORY_TURNS = 10
OUTPUT_CHARS = 2000
MAX_BAD_REPLIES = 3


def prompt(instruction, history):
    text = f"Task:\n{instruction}\n"
    if not history:
        text += "\nNo command has run yet.\n"
    else:
        text += "\nCommands so far (oldest first):\n"
        start = max(0, len(history) - HISTORY_TURNS)
        for i, (command, output, code) in enumerate(history[start:], start + 1):
            if len(output) > OUTPUT_CHARS:
                output = f"[... {len(output) - OUTPUT_CHARS} characters cut]\n" + output[-OUTPUT_CHARS:]
            text += f"\n[{i}] $ {command}\nexit code: {code}\n{output}\n"
    return text + "\nReply with the JSON object only."


class LlmAgent(Agent):
    def setup(self):
        self.llm = LLM()

    def run(self, ctx: AgentContext):
        history = []
        bad = 0
        while True:
            reply = self.llm.ask(prompt(ctx.instruction, history), system=SYSTEM)
            decision = reply.json()
            command = decision.get("command") if isinstance(decision, dict) else None
            complete = bool(decision.get("task_complete")) if isinstance(decision, dict) else False
            if not command and not complete:
                bad += 1
                ctx.log(f"unusable reply: {reply.text[:200]!r}")
                if bad >= MAX_BAD_REPLIES:
                    raise RuntimeError(f"{bad} unusable replies in a row")
                continue
            bad = 0
            if command:
                result = ctx.shell(command)
                history.append((command, result.stdout + result.stderr, result.exit_code))
            if complete:
                ctx.done()
                return


if __name__ == "__main__":
    run(LlmAgent())
