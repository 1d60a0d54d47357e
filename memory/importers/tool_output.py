"""How a tool call ended, read from its output when the format has no field for it.

OpenAI chat's `tool` messages carry only content, and an Anthropic `tool_result` may come without `is_error`: the
application that ran the tool says how it ended in the content instead, either as the JSON object agent frameworks
return (`{"stdout": …, "stderr": …, "exit_code": 2}`, `{"output": …, "returncode": 1}`, `{"error": "…"}`) or as the line
a shell tool appends or puts first ("(exit status 2)", "Exit code: 1", "Process exited with code 2", "Command '…'
returned non-zero exit status 2."). Without it a failed command reads as one that worked, and the dream never sees
the failure a later command fixed.
"""

from __future__ import annotations

import re

import orjson

# Keys an exit code goes by in the JSON agent frameworks return for a command.
CODE_KEYS = ("exit_code", "exitCode", "returncode", "return_code", "exit_status", "exitStatus")
# Keys of the output itself, in the order they are joined (stdout before stderr, as a terminal shows them).
OUTPUT_KEYS = ("output", "stdout", "stderr", "result", "content")
# A line that reports an exit code: "exit code 2", "exit status 2", "exited with code 2", "Exit Code: 2",
# "returncode=2", "returned non-zero exit status 2". Read on a short first or last line only, never in the middle of
# the output (a log that quotes another process's exit is that process's).
EXIT_LINE = re.compile(
    r"\b(?:exit(?:ed)?|return(?:ed)?)(?: with)?[ _]?(?:code|status)\b\s*[:=]?\s*\(?(-?\d{1,3})\)?", re.IGNORECASE
)
LINE_CHARS = 200


def reported_outcome(text: str) -> tuple[str, int | None, bool]:
    """(the output's text, its exit code or None, whether it says the call failed)."""
    stripped = (text or "").strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        found = _from_json(stripped)
        if found is not None:
            return found
    code = _code_line(stripped)
    return text, code, code is not None and code != 0


def _from_json(text: str) -> tuple[str, int | None, bool] | None:
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    code = next((_int(doc[k]) for k in CODE_KEYS if _int(doc.get(k)) is not None), None)
    error = doc.get("error")
    failed = bool(error) or doc.get("success") is False or doc.get("ok") is False
    if code is None and not failed:
        return None  # some other JSON a tool returned: its text as it is
    parts = [doc[k] for k in OUTPUT_KEYS if isinstance(doc.get(k), str) and doc[k].strip()]
    if isinstance(error, str) and error.strip():
        parts.append(error)
    output = "\n".join(p.rstrip("\n") for p in parts) if parts else text
    return output, code, failed or (code is not None and code != 0)


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,3}", value.strip()):
        return int(value)
    return None


def _code_line(text: str) -> int | None:
    lines = [line for line in text.splitlines() if line.strip()]
    for line in (lines[-1], lines[0]) if lines else ():
        if len(line) <= LINE_CHARS and (found := EXIT_LINE.search(line)):
            return int(found.group(1))
    return None
