"""Normalisation and cheap similarity for the deterministic analysis.

Two kinds of tokens matter when deciding whether two texts say the same thing:
* salient words: lower-cased, crudely stemmed, stop words dropped ("Refunds need approval" ~ "approve any refund");
* anchors: the concrete facts a paraphrase must keep: numbers, URLs, hosts, paths, identifiers with digits.
  Two notes with different anchors ("ticket zq001x" vs "ticket zq002x") are different facts, however alike the words.
"""

from __future__ import annotations

import re
import zlib
from functools import lru_cache

from dreamweb.secret_scan import URL_RE  # noqa: F401 - one definition of a URL

HOST_RE = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:[a-z]{2,24})\b", re.I)
UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
HEX_RE = re.compile(r"\b(?:0x)?[0-9a-f]{7,}\b", re.I)
TS_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    r"|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
)
PATH_RE = re.compile(
    r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*|\b[\w-]+\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|"
    r"ini|cfg|conf|md|rst|txt|sh|sql|csv|lock|env|go|rs|rb|java|kt|c|h|cpp|html|css|xml|log)\b"
)
NUM_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
QUOTED_RE = re.compile(r"(['\"`])([^'\"`\n]{1,200})\1")
WORD_RE = re.compile(r"[a-z][a-z0-9_'-]*[a-z0-9]|[a-z]", re.I)
SPACE_RE = re.compile(r"\s+")
IPV4_RE = re.compile(r"(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}")
ID_RE = re.compile(r"\b(?=[a-z_-]*\d)(?=[0-9_-]*[a-z])[a-z0-9][a-z0-9_-]{2,}\b", re.I)

STOPWORDS = frozenset(
    """a about above after again against all also always an and any are as at be because been before being below
    between both but by can could did do does doing don't done down during each else ever every few for from further
    get gets got had has have having he her here hers him his how i if in into is it its it's itself just let me more
    most must my need needs never no nor not now of off on once only or other our ours out over own per please
    really same she should so some such than that the their them then there these they this those through to too
    under until up upon us use used uses using very via was we were what when where which while who whom why will
    with within without would you your yours any one ones instead rather okay ok yes also than thing things
    make sure""".split()  # noqa: SIM905
)

# Function words of the other languages teams write notes in (German, French, Spanish, Italian, Portuguese, Dutch):
# a German or French paraphrase shares its articles and prepositions with any other note in that language, so they
# say nothing about which fact a note states. Negations are here too, as in English: polarity is read apart
# (``negated``).
FOREIGN_STOPWORDS = frozenset(
    """der die das dem den des ein eine einen einem einer eines und oder aber auf aus bei mit nach von vor zu zum zur
    im ins am als wie wenn dann noch nur schon sehr auch ist sind sein seine wird werden wurde hat haben kann muss
    soll sollte es er sie wir ihr ich du sich uns immer hier dort gegen ohne durch für über unter dass damit denn weil
    ob nicht nichts nie niemals kein keine keinen keiner mehr bitte erst alle jede jeder jedes diese dieser dieses
    le la les un une des du de et ou mais donc car ni que qui dont où ce cet cette ces son sa ses leur leurs il elle
    ils elles nous vous on je tu te se lui au aux dans par pour sur sous avec sans chez entre est sont être été
    avoir ont pas plus ne jamais toujours très aussi tout tous toute toutes comme si doit faut
    el los las una unos unas del al y o pero en con sin por para es son ser está están estar se su sus lo le les
    este esta estos estas ese esa muy más siempre nunca también como cuando donde hay ya solo sólo antes después
    il lo gli di da su tra fra ma che non è sono essere sempre mai anche della dei delle alla nel nella
    os um uma do da dos das em na nas não são estar também
    het een van op voor naar bij zijn niet nooit altijd ook wel geen te om""".split()  # noqa: SIM905
)

# Words a paraphrase swaps for one another ("wipe the cache" ~ "delete the cache" ~ "clear the cache"), each form
# read as the family's first word; and a redo as the doing ("rebuild" ~ "build").
_SYNONYMS = {
    form: family[0]
    for family in (("delete", "remove", "wipe", "erase", "purge", "clear"),)
    for word in family
    for form in (word, word + "s", word + "d" if word.endswith("e") else word + "ed",
                 (word[:-1] if word.endswith("e") else word) + "ing")
} | {"rebuild": "build", "rebuilds": "build", "rebuilt": "build", "rerun": "run", "reruns": "run",
     "reinstall": "install", "reinstalls": "install", "reinstalled": "install"}  # fmt: skip

_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ies", "ied", "ed", "es", "ly", "s")


# Short forms a paraphrase uses for the same word: months, weekdays, units.
_ABBREVIATIONS = {
    "jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june", "jul": "july",
    "aug": "august", "sep": "september", "sept": "september", "oct": "october", "nov": "november",
    "dec": "december", "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday",
    "thu": "thursday", "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday",
    "sun": "sunday", "min": "minute", "mins": "minute", "sec": "second", "secs": "second", "hr": "hour",
    "hrs": "hour", "approx": "approximately", "config": "configuration", "repo": "repository",
    "prod": "production", "db": "database", "dbs": "database", "env": "environment", "envs": "environment",
    "dev": "development", "docs": "documentation", "doc": "documentation", "msg": "message", "msgs": "message",
    "req": "request", "reqs": "request", "perms": "permission", "perm": "permission", "info": "information",
}  # fmt: skip


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Crude but stable: strip a common suffix and a final e, then keep six characters ("approval" ~ "approve" ~
    "approved", "minute" ~ "minutes" ~ "min")."""
    w = word.lower().strip("'-_")
    w = _ABBREVIATIONS.get(w, w)
    w = _SYNONYMS.get(w, w)
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 4:
            w = w[: -len(suf)]
            break
    w = w[:6]
    return w[:-1] if w.endswith("e") and len(w) >= 5 else w


def collapse(text: str) -> str:
    return SPACE_RE.sub(" ", text).strip()


def urls(text: str) -> list[str]:
    return [u.rstrip(".,;:!?") for u in URL_RE.findall(text or "")]


def url_host(url: str) -> str:
    m = re.match(r"[a-z0-9+.-]+://(?:[^@/]*@)?([^/:?#]+)", url, re.I)
    return m.group(1).lower() if m else ""


def hosts(text: str) -> set[str]:
    """Hosts named in URLs, plus bare host names such as `staging.acme.test` (not file names like `app.py`)."""
    text = text or ""
    found = {url_host(u) for u in urls(text)}
    rest = URL_RE.sub(" ", text)
    for h in HOST_RE.findall(rest):
        tld = h.rsplit(".", 1)[-1].lower()
        if tld in _FILE_EXTS or h[0].isdigit():
            continue
        found.add(h.lower())
    found.discard("")
    return found


_FILE_EXTS = frozenset(
    ("py", "js", "ts", "tsx", "jsx", "json", "yaml", "yml", "toml", "ini", "cfg", "conf", "md", "rst", "txt", "sh")
    + ("sql", "csv", "lock", "env", "go", "rs", "rb", "java", "kt", "c", "h", "cpp", "html", "css", "xml", "log")
    + ("lib", "so", "exe", "whl", "gz", "tar", "zip", "png", "jpg", "svg", "pdf")
)


def url_anchor(url: str) -> str:
    """A URL as a fact: without its web scheme, so that `https://x.example/drop` and a bare `x.example/drop` in
    another wording of the same note are the same anchor."""
    return re.sub(r"^https?://", "", url.lower()).rstrip("/")


def is_web_anchor(anchor: str) -> bool:
    """An anchor that names a place on the network (a URL or a host, with or without a path), not a file."""
    if "://" in anchor or IPV4_RE.fullmatch(anchor.split("/", 1)[0].split(":", 1)[0]):
        return True
    head = anchor.split("/", 1)[0]
    return bool(HOST_RE.fullmatch(head)) and head.rsplit(".", 1)[-1] not in _FILE_EXTS and not head[0].isdigit()


_UNIT = re.compile(r"^(\d+(?:\.\d+)?)(?:st|nd|rd|th|ms|s|sec|m|min|mins|h|hr|hrs|d|w|k|kb|mb|gb|tb|pb|x|am|pm)$")


def _id_parts(i: str) -> list[str]:
    """An identifier glued to ordinary words (`GRCh38-Analysis-Set`, `hg19-Dateien`, `node18-images`) is the
    identifier: the words are what a sentence says of it, and another wording says them apart (`hg19` ~ `hg19-BAMs`).
    Codes made only of short parts and numbers (`LUM-2290`, `x86-64`, `py3-dev`) stay whole."""
    if "-" not in i:
        return [i]
    parts = i.split("-")
    coded = [p for p in parts if any(c.isdigit() for c in p) and any(c.isalpha() for c in p)]
    if coded and any(p.isalpha() and len(p) >= 4 for p in parts):
        return coded
    return [i]


def _norm_id(i: str) -> str:
    """`2TB` ~ `2 TB`, `1st` ~ `1`, `15min` ~ `15 min`, `P1s` ~ `P1`: the number (or the id) is the fact."""
    m = _UNIT.match(i)
    if m:
        # A thousand multiplier is the number it stands for (`10k` is 10000, `1.5k` 1500); other units go.
        if i.endswith("k") and not i.endswith(("kb",)):
            value = float(m.group(1)) * 1000
            return str(int(value)) if value.is_integer() else m.group(1)
        return m.group(1)
    if re.fullmatch(r"[a-z]+\d+s", i):
        return i[:-1]
    return i


def _norm_num(n: str) -> str:
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", n):
        return n.replace(",", "")
    return n


# A time of day, as people write it: `15:00`, `9:30`, `3pm`, `3 p.m.`, `9:30am`, `15h30`. A `:` or `.` before it
# (`file.py:12:34`, a version) makes it something else.
_TIMES = re.compile(
    r"(?<![\w.:])(?:(?P<h12>1[0-2]|0?[1-9])(?::(?P<m12>[0-5]\d))?\s?(?P<ap>[ap])\.?\s?m\.?(?!\w)"
    r"|(?P<h24>[01]?\d|2[0-3])[:h](?P<m24>[0-5]\d)(?![\w:]))",
    re.I,
)


def clock_times(text: str) -> set[str]:
    """The times of day in a text, each as HH:MM on a 24-hour clock: "3pm CET" and "15:00 CET" state one fact."""
    out = set()
    for m in _TIMES.finditer(text or ""):
        if m.group("ap"):
            hour = int(m.group("h12")) % 12 + (12 if m.group("ap").lower() == "p" else 0)
            out.add(f"{hour:02d}:{m.group('m12') or '00'}")
        else:
            out.add(f"{int(m.group('h24')):02d}:{m.group('m24')}")
    return out


@lru_cache(maxsize=65536)
def anchors(text: str) -> frozenset[str]:
    """The concrete facts in a text: URLs, hosts, paths, numbers, identifiers that contain digits."""
    text = text or ""
    out: set[str] = set()
    for u in urls(text):
        out.add(url_anchor(u))
    rest = URL_RE.sub(" ", text)
    out.update(clock_times(rest))
    rest = _TIMES.sub(" ", rest)
    for p in PATH_RE.findall(rest):
        p = p.strip(".")
        if "/" in p.strip("/") or "." in p:
            out.add(p.lower().rstrip("/"))
    rest = PATH_RE.sub(" ", rest)
    for h in hosts(rest):
        out.add(h)
    rest = HOST_RE.sub(" ", rest)
    for i in ID_RE.findall(rest):
        out.update(_norm_id(part) for part in _id_parts(i.lower()))
    rest = ID_RE.sub(" ", rest)
    for n in NUM_RE.findall(rest):
        out.add(_norm_num(n))
    for m in NUMBER_WORD_RE.finditer(rest):
        out.add(str(_number_word(m.group(0))))
    return frozenset(out)


# Numbers spelt out are the same facts as digits ("iOS sixteen" ~ "iOS 16", "thirty days" ~ "30 days"). "one" is
# left out: it is more often a pronoun ("the new one") than a count.
_UNITS = "zero two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
_UNITS += "eighteen nineteen"
NUMBER_WORDS = {w: (0 if w == "zero" else i + 1) for i, w in enumerate(_UNITS.split())}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_ONES = {"one": 1} | {w: v for w, v in NUMBER_WORDS.items() if 0 < v < 10}
NUMBER_WORD_RE = re.compile(
    r"(?i)(?<![\w-])(?:(?:"
    + "|".join(_TENS)
    + r")(?:-(?:"
    + "|".join(_ONES)
    + r"))?|"
    + "|".join(NUMBER_WORDS)
    + r")(?![\w-])"
)


def _number_word(word: str) -> int:
    w = word.lower()
    if w in NUMBER_WORDS:
        return NUMBER_WORDS[w]
    tens, _, ones = w.partition("-")
    return _TENS[tens] + _ONES.get(ones, 0)


_NUM_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[a-z][a-z0-9_'-]*[a-z0-9]|[a-z]", re.I)


@lru_cache(maxsize=65536)
def qualified_numbers(text: str) -> frozenset[tuple[str, str]]:
    """Each number with the content word right before or after it, stemmed ("iOS 16" and "iOS sixteen" both give
    (ios, 16); "30 days" gives (days, 30)): a number is only a fact together with what it counts."""
    toks = [t.lower() for t in _NUM_TOKEN.findall(URL_RE.sub(" ", text or ""))]
    out = set()
    for i, t in enumerate(toks):
        value = _norm_num(t) if t[0].isdigit() else (str(_number_word(t)) if NUMBER_WORD_RE.fullmatch(t) else "")
        if not value:
            continue
        for j in (i - 1, i + 1):
            word = toks[j] if 0 <= j < len(toks) else ""
            if word[:1].isalpha() and word not in STOPWORDS and not NUMBER_WORD_RE.fullmatch(word):
                word = stem(word)
                out.add((_UNIT_NAMES.get(word, word), value))
    return frozenset(out)


# A unit's short forms are the unit ("72h" ~ "72 hours", "10 s" ~ "10 seconds", "30d" ~ "30 days"), by their stems.
_UNIT_NAMES = {
    **dict.fromkeys(("h", "hr", "hrs"), "hour"),
    **dict.fromkeys(("s", "sec", "secs"), "second"),
    **dict.fromkeys(("min", "mins"), "minut"),
    **dict.fromkeys(("d", "days"), "day"),
    **dict.fromkeys(("wk", "wks"), "week"),
    **dict.fromkeys(("ms", "msec", "msecs"), "millis"),
    **dict.fromkeys(("yr", "yrs"), "year"),
}
# A command-line option named in a text (`-Wall`, `--timing`): its own letters after one or two dashes, not the
# second half of a hyphenated word (`in-band`) or a list's dash.
OPTION_RE = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def options(text: str) -> frozenset[str]:
    """The command-line options a text names, lower-cased: which flags a rule sets is part of what it says."""
    return frozenset(o.lower().rstrip("-") for o in OPTION_RE.findall(URL_RE.sub(" ", text or "")))


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD_RE.findall(text or "")]


@lru_cache(maxsize=65536)
def salient(text: str) -> frozenset[str]:
    """Stemmed content words without stop words, URLs, paths or numbers; words of any script (``zulässige`` is one
    word, not ``zul`` and ``ssige``)."""
    text = URL_RE.sub(" ", text or "")
    text = PATH_RE.sub(" ", text)
    out = set()
    for w in LETTER_WORD_RE.findall(text):
        w = w.lower()
        if _stop(w) or len(w) < 2 or any(ch.isdigit() for ch in w) or NUMBER_WORD_RE.fullmatch(w):
            continue
        for part in re.split(r"[-_']", w):
            if part and not _stop(part) and len(part) > 1:
                out.add(stem(part))
    return frozenset(out)


# A word in any script: letters first and last, digits, `'`, `-` and `_` inside.
LETTER_WORD_RE = re.compile(r"[^\W\d_](?:[\w'’-]*[^\W_])?")


def _stop(word: str) -> bool:
    return word in STOPWORDS or word in FOREIGN_STOPWORDS


def jaccard(a, b) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if inter else 0.0


def overlap(a, b) -> float:
    """Overlap coefficient: |a ∩ b| / min(|a|, |b|); good for a short paraphrase of a longer text."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def containment(a, b) -> float:
    """Share of a that is in b."""
    return len(a & b) / len(a) if a else 0.0


@lru_cache(maxsize=65536)
def shingles(text: str, n: int = 3) -> frozenset[str]:
    t = collapse((text or "").lower())
    if len(t) <= n:
        return frozenset([t]) if t else frozenset()
    return frozenset(t[i : i + n] for i in range(len(t) - n + 1))


def stable_hash(s: str) -> int:
    return zlib.crc32(s.encode())


def minhash_keys(tokens, k: int = 3) -> list[str]:
    """k cheap min-hash picks over the tokens: sets that share most tokens share at least one pick (blocking key)."""
    if not tokens:
        return []
    keys = []
    for seed in range(k):
        keys.append(min(tokens, key=lambda t, s=seed: stable_hash(f"{s}:{t}")))
    return sorted(set(keys))


# --- errors -------------------------------------------------------------------------------------------------------

_EXC_LINE = re.compile(r"^(?:E\s+)?(?:[A-Za-z_][\w.]*\.)?[A-Z][A-Za-z]*(?:Error|Exception|Exit|Interrupt|Fault)\b\s*:")
_ERR_WORDS = re.compile(
    r"\b(?:error|errors|fatal|failed|failure|fail|not found|no such|denied|refused|timed out|timeout|cannot|can't|"
    r"unable|no rule|unknown|invalid|missing|forbidden|unauthori[sz]ed|abort|panic|traceback|exception|"
    r"segmentation|killed|conflict|rejected|undefined|unrecognized|unexpected)\b",
    re.I,
)


ERROR_WORDS = _ERR_WORDS


def _line_score(line: str) -> int:
    core = re.sub(r"[=_\-*#~+\s]{3,}", " ", line).strip()
    if len(words(core)) < 2:
        return -1
    if _EXC_LINE.match(line.strip()):
        return 3
    return 2 if _ERR_WORDS.search(line) else 0


def error_line(text: str) -> str:
    """The most telling line of an error output (exact, unnormalised): the exception line, else the first line
    with an error word, else the first meaningful line."""
    best, best_score = "", -2
    for line in (text or "").splitlines():
        s = _line_score(line)
        # exceptions: the last one is the root cause; other error lines: the first one is usually the headline.
        if s > best_score or (s == 3 and best_score == 3):
            best, best_score = line.strip(), s
    if not best:
        best = collapse(text or "")
    # pytest prefixes assertion/exception lines with "E   "; the rest of the line is the message.
    best = re.sub(r"^E\s{2,}", "", best)
    return best[:300]


def normalize_error(line: str) -> str:
    """Replace what varies between occurrences of one failure: timestamps, uuids, hex ids, URLs/hosts, paths,
    quoted file names, numbers."""
    s = line.strip()
    s = re.sub(r"^E\s+", "", s)
    s = TS_RE.sub("<ts>", s)
    s = UUID_RE.sub("<uuid>", s)
    s = URL_RE.sub("<url>", s)
    s = QUOTED_RE.sub(lambda m: m.group(1) + _norm_quoted(m.group(2)) + m.group(1), s)
    s = PATH_RE.sub(lambda m: "<path>" if ("/" in m.group(0) or "." in m.group(0)) else m.group(0), s)
    s = HOST_RE.sub(lambda m: m.group(0) if m.group(0).rsplit(".", 1)[-1].lower() in _FILE_EXTS else "<host>", s)
    s = HEX_RE.sub(lambda m: "<hex>" if any(c.isdigit() for c in m.group(0)) else m.group(0), s)
    s = re.sub(r"\d+", "<n>", s)
    s = re.sub(r"(?:<n>[.,:]?)+<n>", "<n>", s)
    return collapse(s).lower()


def _norm_quoted(inner: str) -> str:
    # A quoted name that carries a path or a number varies per occurrence; a plain identifier ('deploy', 'app') is
    # the point of the message and stays.
    if "/" in inner or "\\" in inner or re.search(r"\d", inner) or re.search(r"\.\w{1,5}$", inner):
        return "<q>"
    return inner


def error_signature(text: str) -> str:
    return normalize_error(error_line(text))


# --- commands -----------------------------------------------------------------------------------------------------

_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_tokens(cmd: str) -> list[str]:
    return [t for t in re.split(r"\s+", (cmd or "").strip()) if t]


def program(cmd: str) -> str:
    """The executable of a shell command: `PYTHONPATH=src pytest -q` -> `pytest`; `sudo make x` -> `make`."""
    for t in command_tokens(cmd):
        if _ENV_ASSIGN.match(t) or t in ("sudo", "env", "time", "nohup", "exec", "command"):
            continue
        return t.rsplit("/", 1)[-1].lower()
    return ""


# `export A=1 && cmd`, `export A=1; cmd`, `env A=1 cmd`, `set A=1 && cmd` (cmd.exe) all run `A=1 cmd`.
_EXPORTED = re.compile(
    # Assignments are told apart by the space between them: `a=a=a=...` is one assignment, not 2^n ways to cut it.
    r"^(?:export|set)\s+((?:[A-Za-z_]\w*=[^\s;&]*)(?:\s+[A-Za-z_]\w*=[^\s;&]*)*)\s*(?:&&|;)\s*|^env\s+(?=[A-Za-z_]\w*=)"
)


_FLAG_VALUE = re.compile(r"(?<=\s)(--?[a-z][\w-]*)=(?=\S)")


# A tool told where to run by its own flag is the same step as the tool run from there: `npm --prefix web test` is
# `cd web && npm test` (`make -C`, `git -C`, `yarn --cwd`, `pnpm -C`/`--dir`, `go -C`, `uv`/`poetry --directory`,
# `bun --cwd`, `terraform -chdir`). Only the flag right after the program (elsewhere it may mean something else), and
# read before lower-casing (`git -C dir` is a directory, `git -c key=value` a setting).
_WORKDIR_FLAG = re.compile(
    r"^(?P<tool>npm|npx|yarn|pnpm|bun|make|gmake|git|go|uv|poetry|terraform)\s+"
    r"(?:--prefix|--cwd|--dir|--directory|-C|-chdir)(?:\s+|=)(?P<dir>[^\s;&|=]+)\s+(?P<rest>\S.*)$"
)


@lru_cache(maxsize=65536)
def normalize_command(cmd: str) -> str:
    """Whitespace collapsed, lower-cased, volatile ids (uuids, long hex, timestamps, long numbers) replaced; a
    variable exported for one command written as the assignment before it (`export A=1 && cmd` is `A=1 cmd`)."""
    s = collapse(cmd or "")
    s = "".join(_in_directory(part) for part in re.split(r"(\s*(?:&&|\|\||;)\s*)", s))
    s = _EXPORTED.sub(lambda m: (m.group(1) or "").strip() + " " if m.group(1) else "", s).strip().lower()
    s = _FLAG_VALUE.sub(r"\1 ", s)  # `-timeout=30m` is `-timeout 30m`
    s = TS_RE.sub("<ts>", s)
    s = UUID_RE.sub("<uuid>", s)
    s = HEX_RE.sub(lambda m: "<hex>" if any(c.isdigit() for c in m.group(0)) else m.group(0), s)
    s = re.sub(r"\b\d{4,}\b", "<n>", s)
    return s


def _in_directory(part: str) -> str:
    m = _WORKDIR_FLAG.match(part)
    return f"cd {m.group('dir')} && {m.group('tool')} {m.group('rest')}" if m else part


def command_edit(old: str, new: str) -> tuple[str, str]:
    """A correction of a command as what changed and what comes before it, without the words both commands end with
    (the operands one session names: a service, a package, a branch), so that the same correction made on other
    operands is one lesson: `docker-compose up -d redis` -> `docker compose up -d redis` is (`docker-compose`,
    `docker compose`), whatever the service. Each side keeps one word at least (`pytest` -> `python -m pytest`
    stays whole)."""
    a, b = normalize_command(old).split(), normalize_command(new).split()
    if a == b:
        # The change is in what masking hides (a port, a year): the words themselves say what changed.
        a, b = collapse(old).lower().split(), collapse(new).lower().split()
    n = 0
    while n < min(len(a), len(b)) - 1 and a[-1 - n] == b[-1 - n]:
        n += 1
    return " ".join(a[: len(a) - n]), " ".join(b[: len(b) - n])


_CHAIN = re.compile(r"\s*(?:&&|\|\||;)\s*")


def command_parts(cmd: str) -> list[str]:
    """The commands of a chain: `nvm use 20 && npm ci` -> [`nvm use 20`, `npm ci`]."""
    return [p for p in _CHAIN.split(collapse(cmd or "")) if p]


def similar_commands(a: str, b: str) -> bool:
    """Is b plausibly a corrected version of a (same program, or mostly the same text, or a chain that runs a
    preparatory step and then a or a variant of it)?"""
    na, nb = normalize_command(a), normalize_command(b)
    if not na or not nb:
        return False
    if na == nb:
        # Alike once volatile numbers are masked (`-p 5432` / `-p 5433`): a variant when the words differ.
        return collapse(a) != collapse(b)
    parts = command_parts(nb)
    if len(parts) > 1 and any(p == na or _similar_single(na, p) for p in parts):
        return True
    return _similar_single(na, nb)


# Programs that only run another one: `python setup.py test` and `python -m pytest` are different tools.
_INTERPRETERS = re.compile(r"^(?:python[\d.]*|py|node|nodejs|deno|ruby|perl|php|bash|sh|zsh|npx|pnpx|bunx|java)$")


def _script(cmd: str) -> str:
    """What an interpreter runs: the script, the `-m` module or the `-jar` file; empty for other programs."""
    toks = command_tokens(cmd)
    while toks and (_ENV_ASSIGN.match(toks[0]) or toks[0] in ("sudo", "env", "time", "nohup", "exec", "command")):
        toks = toks[1:]
    if not toks or not _INTERPRETERS.match(toks[0].rsplit("/", 1)[-1].lower()):
        return ""
    rest = toks[1:]
    for i, t in enumerate(rest):
        if t in ("-m", "-jar", "-c") and i + 1 < len(rest):
            return f"{t} {rest[i + 1]}".lower()
        if not t.startswith("-"):
            return t.lower()
    return ""


def _similar_single(na: str, nb: str) -> bool:
    if na == nb:
        return False
    pa, pb = program(na), program(nb)
    if _script(na) == _script(nb):
        if pa and pa == pb:
            return True
        # `./run-lab.sh` -> `bin/run-lab`, `python3.8` -> `python3`: the same tool under another name or place.
        sa, sb = program_stem(pa), program_stem(pb)
        if len(sa) >= 3 and sa == sb:
            return True
    return jaccard(shingles(na), shingles(nb)) >= 0.4


def program_stem(p: str) -> str:
    p = p.rsplit("/", 1)[-1]
    p = re.sub(r"\.(?:sh|py|rb|pl|js|exe|bat|cmd|ps1)$", "", p)
    return re.sub(r"[\d.]+$", "", p)


def command_words(cmd: str) -> set[str]:
    """Word tokens of a command or query, for what changed between two actions."""
    out = set()
    for t in command_tokens((cmd or "").lower()):
        t = t.strip("'\"`,;()[]{}")
        if t:
            out.add(t)
    return out


def as_written(word: str, cmd: str) -> str:
    """A word of ``command_words`` (lower case, for comparing) as the command writes it: a lesson that names a flag or
    a task must name the one that works (`-Dspring.profiles=local`, `bundleRelease`; not `-dspring…`,
    `bundlerelease`)."""
    for t in command_tokens(cmd or ""):
        t = t.strip("'\"`,;()[]{}")
        if t.lower() == word:
            return t
    return word


def shape_words(cmd: str) -> set[str]:
    """The words of a command that say what it does, not what it does it to: the program, its first word after
    that (a subcommand or a target: `switch`, `html`), and its flags; not the operands one session names after them
    (a branch, a file, a package): `git switch -c feat/x` -> {git, switch, -c}. Chains: each command's."""
    out: set[str] = set()
    for part in command_parts((cmd or "").lower()):
        toks = [t.strip("'\"`,;()[]{}") for t in command_tokens(part)]
        toks = [t for t in toks if t]
        while toks and (_ENV_ASSIGN.match(toks[0]) or toks[0] in ("sudo", "env", "time", "nohup", "exec", "command")):
            toks = toks[1:]
        positional = 0
        for t in toks:
            if t.startswith("-"):
                out.add(t.split("=", 1)[0])
            elif positional < 2:
                out.add(t)
                positional += 1
    return out


# A statement that denies what it names ("deploys are not allowed on Fridays", "no longer runs on weekends"): the
# same words with the opposite meaning. English, German, French, Spanish, Italian, Portuguese, Dutch.
_NEGATION = re.compile(
    r"(?i)(?<![\w'])(?:not|never|no longer|cannot|nicht|nie|niemals|kein(?:e[nmrs]?)?|nicht mehr|ne\b[^.;!?]{0,30}"
    r"\b(?:pas|plus|jamais)|nunca|jamás|ya no|non|mai|niet|nooit|geen)(?![\w'])|n't\b"
)


# A contrast after the statement ("port 6380, not 6379", "30 s, not the default 5 s", "6380, nicht auf 6379"): it
# says what the fact is not, and leaves the statement affirmative.
_CONTRAST = re.compile(
    r"(?i)[,;(\u2014\u2013]\s*(?:but\s+|aber\s+|mais\s+)?(?:not|never|nicht|nie|pas|jamais|non|niet|no|nunca)\b"
    r"[^,.;)]*"
)


def negated(text: str) -> bool:
    """Does the statement deny what it names? Two statements of the same words and opposite polarity are two
    facts, one the other's contradiction, never one. A contrast clause does not count."""
    return bool(_NEGATION.search(_CONTRAST.sub(" ", text or "")))


def slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")
    return s[:limit].rstrip("-") or "entry"


def content_key(text: str) -> str:
    """A normalised key of a text for signatures: sorted anchors and salient words."""
    return " ".join(sorted(anchors(text))) + " | " + " ".join(sorted(salient(text)))


def clear_caches() -> None:
    """Forget the memoised text functions (benchmarks call it so every run starts cold)."""
    for fn in (stem, anchors, salient, shingles, normalize_command, qualified_numbers):
        fn.cache_clear()


# --- where the session ran ----------------------------------------------------------------------------------------

HOME_RE = re.compile(r"(?:/Users/|/home/|[A-Za-z]:\\Users\\)([^/\\\s'\"`:]+)")
# Account names that are ordinary words or machine accounts: never scrubbed as a person's name from prose.
_GENERIC_ACCOUNTS = frozenset(
    ("user", "users", "admin", "administrator", "root", "dev", "developer", "ubuntu", "runner", "ci", "build")
    + ("guest", "test", "default", "shared", "me", "owner", "app", "service")
)


def localizer(metadata: dict | None):
    """A function that writes a session's text as the project sees it: paths under the session's working directory
    relative to it (`/Users/ana/src/app/cmd/x.go` -> `cmd/x.go`, so two developers' checkouts are one place), other
    home directories as `~`, and the account name of a home directory never left in the text. Lessons are keyed on
    and worded with what comes out of it: no home directory or person's account name reaches a proposal."""
    meta = metadata if isinstance(metadata, dict) else {}
    roots = sorted(
        {r.rstrip("/\\") for r in (meta.get(k) for k in ("cwd", "repo_root", "project_root")) if isinstance(r, str)}
        - {"", "/"},
        key=len,
        reverse=True,
    )
    names = {m.group(1) for r in roots for m in HOME_RE.finditer(r)}
    subs = [(re.compile(re.escape(r) + r"(?:[/\\]+|(?![\w.-]))"), r) for r in roots]
    person = [n for n in names if n.lower() not in _GENERIC_ACCOUNTS and len(n) >= 3]
    name_re = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, person)) + r")(?![\w-]|\.\w)") if person else None

    def local(text: str) -> str:
        if not text or not isinstance(text, str):
            return text
        for pat, _ in subs:
            text = pat.sub(lambda m: "" if m.group(0)[-1:] in "/\\" else ".", text)
        text = HOME_RE.sub("~", text)
        if name_re is not None:
            text = name_re.sub("<user>", text)
        return text

    return local
