"""term_sdk for wasbox: the term-challenge SDK API (2.0, and 1.x's `solve`), served by the
wasbox host.

An agent file written against the term SDK runs unchanged:

    from term_sdk import Agent, AgentContext, LLM, run

    class MyAgent(Agent):
        def setup(self):
            self.llm = LLM()

        def run(self, ctx: AgentContext):
            result = ctx.shell("ls -la")
            if result.ok:
                ctx.log(result.output)
            ctx.done()

    if __name__ == "__main__":
        run(MyAgent())

`wasbox term build agent.py -o agent.wasm` makes it a component of world
`wasbox:term/agent@2.0.0`; a file whose agent implements `solve(self, req)` instead (SDK
1.x: `Request`, `Response.cmd/done/from_llm`) becomes one of `wasbox:term/agent@1.0.0`. Inside it, every `ctx` call and every LLM call is a call to the
host: shell commands run as `sh -c` in the task sandbox (the task directory is `/app`), the
LLM is reached through the validator's proxy, and nothing else leaves the sandbox.
"""

import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from wit_world.imports import llm as _llm
from wit_world.imports import types as _types
from componentize_py_types import Err

try:  # term SDK 2.0 (wasbox:term/agent@2.0.0); a term1 agent (@1.0.0) has no context.
    from wit_world.imports import context as _context
except ImportError:
    _context = None

__version__ = "2.0.0"

__all__ = [
    "Agent", "AgentContext", "ShellResult", "HistoryEntry", "LLM", "LLMResponse", "LLMError",
    "Request", "Response", "run", "log",
]


def log(message: str) -> None:
    """A line for the operator's log (stderr)."""
    print(f"[agent] {message}", file=sys.stderr, flush=True)


@dataclass
class ShellResult:
    """What `ctx.shell` returns."""
    command: str
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    duration_ms: int = 0

    @property
    def output(self) -> str:
        """stdout, then stderr on a new line when there is any."""
        if self.stderr:
            return f"{self.stdout}\n{self.stderr}" if self.stdout else self.stderr
        return self.stdout

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    def has(self, *patterns: str) -> bool:
        """Whether the output contains any of `patterns` (case-insensitive)."""
        low = self.output.lower()
        return any(p.lower() in low for p in patterns)

    def __str__(self) -> str:
        return self.output


@dataclass
class HistoryEntry:
    step: int
    command: str
    output: str
    exit_code: int


class AgentContext:
    """The task an agent works on, and what it may do about it."""

    def __init__(self, instruction: str, max_steps: int = 200, timeout_secs: int = 300):
        self._instruction = instruction
        self.max_steps = max_steps
        self.timeout_secs = timeout_secs
        self.history: List[HistoryEntry] = []
        self._done = False

    @property
    def instruction(self) -> str:
        return self._instruction

    @property
    def step(self) -> int:
        """Shell commands run so far."""
        return _context.step()

    @property
    def elapsed_secs(self) -> int:
        return _context.elapsed_secs()

    @property
    def is_done(self) -> bool:
        return self._done

    def shell(self, cmd: str, timeout: Optional[float] = 60, cwd: Optional[str] = None) -> ShellResult:
        """Runs `sh -c cmd` in the task directory (or `cwd`). One step.

        A command still running after `timeout` seconds is ended: exit code -1 and
        `Command timed out after {timeout}s` on stderr. Past `max_steps`, past the task's
        timeout or after `done()`, the host fails the task here and the agent is ended.
        """
        started = time.monotonic()
        r = _context.shell(cmd, None if timeout is None else float(timeout), cwd)
        result = ShellResult(
            command=cmd,
            stdout=r.stdout,
            stderr=r.stderr,
            exit_code=r.exit_code,
            timed_out=r.timed_out,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        self.history.append(HistoryEntry(self.step, cmd, result.output, result.exit_code))
        return result

    def read(self, path: str) -> str:
        """The text of a file of the task directory. Raises OSError if it cannot be read."""
        try:
            return _context.read(path)
        except Err as e:
            raise OSError(str(e.value)) from None

    def write(self, path: str, content: str) -> bool:
        """Creates or replaces a file of the task directory (and its parent directories)."""
        try:
            _context.write(path, content)
        except Err as e:
            raise OSError(str(e.value)) from None
        return True

    def log(self, message: str) -> None:
        _context.log(str(message))

    def done(self) -> None:
        """Marks the task complete; it ends `completed` when `run` returns."""
        self._done = True
        _context.done()


class Agent:
    """Subclass and implement `run(ctx)` (SDK 2.0) or `solve(req)` (SDK 1.x); `setup` and
    `cleanup` are optional."""

    def setup(self) -> None:
        pass

    def run(self, ctx: AgentContext) -> None:
        raise NotImplementedError("an agent must implement run(self, ctx)")

    def solve(self, req: "Request") -> "Response":
        raise NotImplementedError("an SDK 1.x agent must implement solve(self, req)")

    def cleanup(self) -> None:
        pass


# -- SDK 1.x: one request per step, the harness runs the commands -------------------------

@dataclass
class Request:
    """One request line of the harness."""
    instruction: str
    step: int = 1
    last_command: Optional[str] = None
    output: Optional[str] = None
    exit_code: Optional[int] = None
    cwd: str = "/app"

    @property
    def first(self) -> bool:
        return self.step == 1

    @property
    def output_text(self) -> str:
        return self.output or ""

    def get_output(self, max_chars: int = 3000) -> str:
        """The last output, cut to its last `max_chars` characters."""
        out = self.output or ""
        return out if len(out) <= max_chars else out[-max_chars:]

    @property
    def ok(self) -> bool:
        return self.exit_code in (None, 0)

    @property
    def failed(self) -> bool:
        return not self.ok

    def has(self, *patterns: str) -> bool:
        low = (self.output or "").lower()
        return any(p.lower() in low for p in patterns)


@dataclass
class Response:
    """One response line: a command to run, or completion."""
    command: Optional[str] = None
    task_complete: bool = False
    text: Optional[str] = None
    analysis: Optional[str] = None
    plan: Optional[str] = None
    commands: List[Dict[str, Any]] = field(default_factory=list)

    @classmethod
    def cmd(cls, command: str, text: Optional[str] = None) -> "Response":
        return cls(command=command, task_complete=False, text=text)

    @classmethod
    def done(cls, text: Optional[str] = None) -> "Response":
        return cls(command=None, task_complete=True, text=text)

    @classmethod
    def from_llm(cls, text: str) -> "Response":
        """Reads a model's reply: the first balanced `{...}` with `command` and
        `task_complete` (the legacy `analysis`/`plan`/`commands` too). An unreadable reply
        runs nothing and does not complete; the text is kept."""
        obj = _first_object(text or "")
        try:
            data = json.loads(obj) if obj else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return cls(text=text)
        command = data.get("command")
        return cls(
            command=command if isinstance(command, str) and command.strip() else None,
            task_complete=bool(data.get("task_complete", False)),
            text=data.get("text") if isinstance(data.get("text"), str) else None,
            analysis=data.get("analysis") if isinstance(data.get("analysis"), str) else None,
            plan=data.get("plan") if isinstance(data.get("plan"), str) else None,
            commands=[c for c in data.get("commands") or [] if isinstance(c, dict)],
        )

    def with_text(self, text: str) -> "Response":
        self.text = text
        return self


class LLMError(Exception):
    def __init__(self, message: str, code: str = "llm_error"):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class LLMResponse:
    text: str
    model: str
    tokens: int = 0
    cost: float = 0.0
    latency_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw: Optional[Dict[str, Any]] = None

    @property
    def content(self) -> str:
        return self.text

    def json(self) -> Optional[Dict[str, Any]]:
        """The first balanced `{...}` of the text as JSON, or None."""
        obj = _first_object(self.text)
        if obj is None:
            return None
        try:
            return json.loads(obj)
        except ValueError:
            return None


def _first_object(text: str) -> Optional[str]:
    start = text.find("{")
    if start < 0:
        return None
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


class LLM:
    """The LLM, through the host (the validator's proxy). `model=None` lets the host choose
    (its `LLM_MODEL`)."""

    def __init__(self, model: Optional[str] = None, temperature: float = 0.3,
                 max_tokens: int = 4096, timeout: Optional[int] = None, **_: Any):
        self.model = model
        self.default_model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.total_tokens = 0
        self.total_cost = 0.0
        self.request_count = 0

    def chat(self, messages: List[Any], model: Optional[str] = None,
             temperature: Optional[float] = None, max_tokens: Optional[int] = None,
             **_: Any) -> LLMResponse:
        wit_messages = []
        for m in messages:
            role = m.get("role", "user") if isinstance(m, dict) else getattr(m, "role", "user")
            content = m.get("content") if isinstance(m, dict) else getattr(m, "content", "")
            if not isinstance(content, str):
                content = "" if content is None else json.dumps(content)
            wit_messages.append(_llm.Message(role=str(role), content=content))
        options = _llm.ChatOptions(
            model=model or self.model,
            max_tokens=max_tokens if max_tokens is not None else self.max_tokens,
            temperature=temperature if temperature is not None else self.temperature,
        )
        started = time.monotonic()
        try:
            c = _llm.chat(wit_messages, options)
        except Err as e:
            raise LLMError(str(e.value)) from None
        self.request_count += 1
        self.total_tokens += c.usage.total_tokens
        self.total_cost += c.cost_usd
        return LLMResponse(
            text=c.content,
            model=c.model,
            tokens=c.usage.total_tokens,
            cost=c.cost_usd,
            latency_ms=int((time.monotonic() - started) * 1000),
            prompt_tokens=c.usage.prompt_tokens,
            completion_tokens=c.usage.completion_tokens,
        )

    def ask(self, prompt: str, system: Optional[str] = None, **kwargs: Any) -> LLMResponse:
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        return self.chat(messages, **kwargs)

    def close(self) -> None:
        pass

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *args: Any) -> None:
        pass


_registered: Optional[Agent] = None


def run(agent: Agent) -> None:
    """Names the agent the host runs. (There is no server to start: wasbox serves HTTP.)"""
    global _registered
    _registered = agent


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class _Host:
    """The world's exports, calling the agent."""

    def __init__(self, find_agent):
        self._find_agent = find_agent
        self._agent: Optional[Agent] = None

    def setup(self) -> None:
        try:
            self._agent = self._find_agent()
            self._agent.setup()
        except Exception as e:
            traceback.print_exc()
            raise Err(_error_text(e))

    def run(self, task) -> None:
        if self._agent is None:
            self.setup()
        ctx = AgentContext(task.instruction, task.max_steps, task.timeout_secs)
        try:
            self._agent.run(ctx)
        except Exception as e:
            traceback.print_exc()
            raise Err(_error_text(e))

    def solve(self, request):
        if self._agent is None:
            self.setup()
        req = Request(
            instruction=request.instruction,
            step=request.step,
            last_command=request.last_command,
            output=request.output,
            exit_code=request.exit_code,
            cwd=request.cwd,
        )
        try:
            r = self._agent.solve(req)
        except Exception as e:
            traceback.print_exc()
            raise Err(_error_text(e))
        if isinstance(r, dict):
            r = Response(**r)
        if not isinstance(r, Response):
            raise Err(f"TypeError: solve() returned {type(r).__name__}, not a Response")
        return _types.Response(
            command=r.command,
            task_complete=bool(r.task_complete),
            text=r.text,
            analysis=r.analysis,
            plan=r.plan,
            commands=[
                _types.Keystrokes(
                    keystrokes=str(c.get("keystrokes", "")),
                    duration=float(c["duration"]) if c.get("duration") is not None else None,
                )
                for c in r.commands
            ],
        )

    def cleanup(self) -> None:
        if self._agent is not None:
            try:
                self._agent.cleanup()
            except Exception:
                traceback.print_exc()
