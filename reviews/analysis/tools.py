"""How a tool call reads, for every signal that looks at tool calls (the rules analyzer's actions, the recurring
procedures of skill proposals): which tools are shells, and which argument says what a call does."""

from __future__ import annotations

import re

# A tool whose argument is a shell command line (real agents' too: Codex's exec_command and local_shell, Gemini
# CLI's run_shell_command).
SHELL_TOOLS = re.compile(
    r"^(?:bash|sh|zsh|shell|terminal|run|exec|execute|run_command|run_shell|command|cmd|exec_command|local_shell"
    r"|run_shell_command|shell_command"
    # other agents' names for it: Cursor's run_terminal_cmd, Cline's execute_command, Copilot's run_in_terminal...
    r"|(?:run|exec|execute)_(?:terminal|shell|bash|in_terminal)(?:_(?:cmd|command))?|execute_command|run_in_terminal"
    r"|(?:terminal|shell|bash)_(?:exec|execute|run|command|cmd))$",
    re.I,
)
# The arguments that say what a call does, most telling first (a command before a path before a query...).
ARG_KEYS = (
    "command",
    "cmd",
    "script",
    "path",
    "file",
    "file_path",
    "filename",
    "query",
    "q",
    "pattern",
    "url",
    "target",
    "input",
    "text",
)


def main_argument(arguments: dict) -> str | None:
    """The first non-blank string among a call's ARG_KEYS arguments, as given; None when there is none."""
    for key in ARG_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def own_name(name: str) -> str:
    """A tool's own name without its server or namespace (`mcp__tools__esign`, `functions.kubectl`)."""
    return re.split(r"__|[./:]", name)[-1] if name else ""


def call_text(name: str, arg: str) -> str:
    """How a non-shell call reads in a lesson: ``tool argument``, except that an argument which is already a command
    line naming the tool (a CLI wrapped as a tool: ``kubectl`` called with ``kubectl get pods``) is not prefixed
    with its name again (nor with its MCP server's: ``mcp__ops__kubectl``), so that the lesson reads as the command
    the person and the memory write."""
    arg = arg.strip()
    first = arg.split(None, 1)[0] if arg else ""
    own = own_name(name)
    if own and first.lower() == own.lower():
        return arg
    return f"{name} {arg}".strip()
