"""Secret detection and redaction: well-known credential shapes, credentials assigned to names that say so,
credentials in URLs, command lines and configuration files, and long random tokens near a credential word.

Pure functions, no Django. Everything that may carry an agent's text towards memory or a model uses them: the
memory service refuses an agent's in-band write that holds a secret, the dream's risk rules
(reviews.analysis.risk) mark and redact proposals, the analysers redact what they send to a model.
"""

from __future__ import annotations

import base64
import math
import re
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar

# A URL as the text analysis reads one (reviews.analysis.normalize takes it from here).
URL_RE = re.compile(r"\b(?:https?|ftp|s3|gs)://[^\s'\"`<>()\[\]{}]+", re.I)

REDACTED = "[REDACTED]"

# A token's edges are where letters and digits stop, not where word characters do: an underscore glues a token to a
# name (`http_ghp_…`, a tool `deploy_sk-…`) without ending it, and a word boundary sees no edge there. Written as one
# plain lookaround per edge (a boundary before a token's prefix, after its run), not as a two-sided boundary test: the
# scan stays as fast as with word boundaries (the two-sided form was 4x slower on plain text).
_TRAILING_EDGE = re.compile(r"\\b(?=$|\||\))")


def _token(pattern: str) -> re.Pattern:
    """A token's pattern written with word boundaries, each read as a letters-and-digits edge: a boundary at the end
    of an alternative as "no letter or digit follows", any other as "no letter or digit precedes"."""
    pattern = _TRAILING_EDGE.sub(lambda _: "(?![A-Za-z0-9])", pattern)
    return re.compile(pattern.replace(r"\b", "(?<![A-Za-z0-9])"))


# Well-known credential shapes. Each pattern matches the secret itself (group 0), so it can be replaced.
SECRET_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)")),
    ("Stripe key", _token(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}\b")),
    ("OpenAI-style key", _token(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}\b")),
    ("GitHub token", _token(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b|\bgithub_pat_[A-Za-z0-9_]{20,}\b")),
    ("GitLab token", _token(r"\bglpat-[A-Za-z0-9_-]{16,}\b")),
    # In any case: a key lower-cased on its way (a query's words, a noun) is still the key.
    ("AWS access key", _token(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\b(?:akia|asia)(?=[a-z]*\d)[0-9a-z]{16}\b")),
    ("Slack token", _token(r"\bxox[abposr]-[A-Za-z0-9-]{8,}\b")),
    ("Google API key", _token(r"\bAIza[0-9A-Za-z_-]{30,}\b")),
    ("JWT", _token(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b")),
    # `scheme://user:password@host`, the user possibly empty (`redis://:password@cache`), the password possibly holding
    # an unencoded `@` (it runs to the last `@` before the host).
    ("URL credentials", re.compile(r"(?<=://)[^\s/:@]*:[^\s/]+(?=@[^\s@/]+(?:[:/?#'\"`)\]]|\s|$))")),
    # A key as the URL's user name with no password (a Sentry DSN `https://<key>@o1.ingest.sentry.io/5`): a run of
    # 16 or more letters and digits before the `@`, with a digit in it; `git@`, `deploy@` are names.
    ("URL credentials", re.compile(r"(?<=://)(?=[^\s/:@]*\d)[A-Za-z0-9_-]{16,}(?=@)")),
    # Vendor tokens known by their prefix (Slack app/config tokens, SendGrid, npm, PyPI, Hugging Face, Shopify,
    # DigitalOcean, Stripe webhook signing secrets, GitLab deploy/runner tokens, Mailgun, Twilio API keys, Telegram
    # bot tokens, Azure connection strings).
    (
        "vendor token",
        _token(
            r"\b(?:xox[a-z]-|xapp-|xoxe\.xox[a-z]-)[A-Za-z0-9-]{8,}|\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|"
            r"\b(?:npm|hf|shpat|shpss|shpca|shppa|whsec|dop_v1|doo_v1|dor_v1|gldt|glrt|glptt|glsoat|sk_live|"
            r"rk_live)_[A-Za-z0-9_-]{16,}|\bpypi-AgE[A-Za-z0-9_-]{16,}|\bkey-[0-9a-z]{32}\b|\bSK[0-9a-f]{32}\b|"
            r"\b\d{8,10}:AA[A-Za-z0-9_-]{30,}|(?i:\b(?:Account|SharedAccess)Key=)[A-Za-z0-9+/=]{16,}|"
            # Sentry, Supabase, Linear, Postman; Databricks; Vault; Doppler; a Discord bot token (id.timestamp.hmac)
            r"\b(?:sntry[su]_|sbp_|lin_api_|PMAK-)[A-Za-z0-9_-]{20,}|\bdapi[0-9a-f]{32}\b|\bhv[sbr]\.[A-Za-z0-9_-]{20,}|"
            r"\bdp\.(?:st|pt|sa|ct|scim|audit)\.(?:[a-z0-9_-]+\.)?[A-Za-z0-9]{20,}|"
            r"\b[MN][A-Za-z0-9]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}|"
            # Pulumi, Buildkite agent and API tokens, a Google OAuth access token
            r"\bpul-[0-9a-f]{40}\b|\bbk(?:ua|ca)_[A-Za-z0-9]{20,}|\bya29\.[A-Za-z0-9_-]{20,}|"
            # GitLab's other tokens (pipeline trigger, deploy, runner, OAuth, CI build, feed, agent), a Dropbox
            # short-lived access token
            r"\bgl(?:ptt|dt|rt|soat|oas|cbt|imt|ft|agent|ffct)-[A-Za-z0-9_-]{16,}|\bsl\.[A-Za-z0-9_-]{60,}"
        ),
    ),
    # `Authorization: Bearer <token>`, `Basic <base64>`: the credential after the scheme word.
    ("HTTP credentials", re.compile(r"(?<=\bBearer )[A-Za-z0-9._~+/=-]{8,}|(?<=\bBasic )[A-Za-z0-9+/=]{12,}")),
]
# A URL that is itself a credential: whoever has it may post (Slack, Discord, Teams, Google Chat, Zapier, IFTTT,
# Mattermost and any `/hooks/` or `/webhook` endpoint, a Telegram bot URL). Its host stays; everything after it goes.
WEBHOOK_URL = re.compile(
    r"(?i)(?:\bhttps?://(?:[\w-]+\.)*(?:[\w-]*(?:hooks?|webhook)[\w-]*\.[\w.-]+|discord(?:app)?\.com|"
    r"chat\.googleapis\.com|maker\.ifttt\.com|api\.telegram\.org)(?::\d+)?|"
    r"\b(?:hooks\.slack\.com|hooks\.zapier\.com|(?<![\w-])[\w-]+\.webhook\.office\.com|maker\.ifttt\.com|"
    r"chat\.googleapis\.com|api\.telegram\.org|discord(?:app)?\.com(?=/api/webhooks))|"
    # any other host, when the path has a hooks/webhook segment followed by an id (digits in it) or a bot token
    r"\bhttps?://[\w.-]+(?::\d+)?(?=/(?:[^\s'\"`<>/]+/)*(?:(?:hooks?|webhooks?|webhookb2)/[\w-]*\d[\w-]{7,}|"
    r"bot\d+:)))"
    r"/(?P<path>[^\s'\"`<>()\[\]{}]+)"
)
# `?token=…&sig=…`: a query parameter named as a credential (pre-signed URLs, API keys in links).
URL_SECRET_PARAM = re.compile(
    # (`authMechanism=MONGODB-X509`, `authSource=admin` name how to authenticate, not with what)
    r"(?i)[?&;](?!auth(?:mechanism|source|type|method)=)"
    r"(?:[\w.-]*(?:token|secret|passw(?:or)?d|api[_-]?key|apikey|access[_-]?key|signature|credential|"
    r"auth)[\w.-]*|key|sig|code|private[_-]?token)=(?P<value>[^\s&#;'\"`<>]{6,})"
)
# `…/token/<value>`, `…/key/<value>`: a path segment named as a credential, and the value after it.
URL_SECRET_SEGMENT = re.compile(
    r"(?i)(?<=[\w.-]/)(?:token|key|apikey|api[_-]?key|secret|access[_-]?token)/(?P<value>[A-Za-z0-9_+=.-]{12,})"
)
# A path segment of a URL that mixes lower case, upper case and digits at length: a capability token in the link.
URL_RANDOM_SEGMENT = re.compile(r"(?<=/)[A-Za-z0-9_-]{20,}(?=[/?#\s'\"`<>)\]]|$)")
# Credentials known by where they stand; the group "value" is the secret.
POSITIONAL_SECRETS: list[tuple[str, re.Pattern]] = [
    # A libpq password file line (`host:port:database:user:password`): the password at its end.
    (
        "password file line",
        re.compile(r"(?<![\w./:-])[\w.*-]+:(?:\d{1,5}|\*):[\w.*-]+:[\w.*-]+:(?P<value>[^\s:'\"`]{4,})"),
    ),
    # A password given to a command: after its option (`--password X`, `--passwd=X`, `sshpass -p X`, mysql's
    # `-pX`) or after the user name of steamcmd's `+login user X`.
    (
        "command-line password",
        re.compile(
            r"(?i)(?:--pass(?:word|wd)?[ =]|\bsshpass\s+-p\s*|\bmysql(?:dump|admin)?\b[^\n|;]*?\s-p|\+login\s+\S+\s+)"
            r"['\"]?(?P<value>[^\s'\"`-][^\s'\"`]{3,})"
        ),
    ),
    # `curl -u user:password`, `wget --user=user:password`, `--user deploy:pw`: the part after the colon.
    (
        "command-line password",
        re.compile(r"(?:\s-u\s*|--user[ =])['\"]?[^\s:'\"`]+:(?P<value>[^\s'\"`]{3,})"),
    ),
    # The short password options of the tools that take one: a registry login (`docker login -p X`, podman, helm,
    # nerdctl, buildah, skopeo), `redis-cli -a X`, the LDAP tools' `-w X`, SQL Server's `sqlcmd`/`bcp`/`osql -P X`,
    # and `htpasswd -b FILE USER X`.
    (
        "command-line password",
        re.compile(
            r"(?:\b(?:docker|podman|nerdctl|buildah|skopeo|helm(?:\s+registry)?)\s+login\b[^\n|;]*?\s-p\s+|"
            r"\bredis-cli\b[^\n|;]*?\s-a\s+|\bldap\w*\b[^\n|;]*?\s-w\s+|\b(?:sqlcmd|bcp|osql|isql)\b[^\n|;]*?\s-P\s*|"
            r"\bhtpasswd\s+(?=(?:[^\n|;]*\s)?-\w*b)(?:-\w+\s+)*[^\s-]\S*\s+\S+\s+|"
            # Java's keytool, zip, the Azure CLI, Sysinternals' PsExec; RabbitMQ's and Windows' user commands
            r"\s-(?:src|dest)?(?:store|key)pass\s+|\bzip\b[^\n|;]*?\s-P\s+|\baz\s+login\b[^\n|;]*?\s-p\s+|"
            r"\b(?i:psexec)(?:64)?(?:\.exe)?\b[^\n|;]*?\s-p\s+|"
            r"\brabbitmqctl\s+(?:add_user|change_password|authenticate_user)\s+\S+\s+|\bnet\s+user\s+[^\s/]+\s+(?=[^\s/*]))"
            r"['\"]?(?P<value>[^\s'\"`-][^\s'\"`]{3,})"
        ),
    ),
    # 7-Zip's password glued to its option (`7z a -pS3cret archive.7z`); `chpasswd` fed `user:password`.
    ("command-line password", re.compile(r"\b7za?\b[^\n|;]*?\s-p(?P<value>[^\s'\"`-][^\s'\"`]{3,})")),
    (
        "command-line password",
        re.compile(r"\becho\s+['\"]?[\w.-]+:(?P<value>[^\s'\"`]{4,})['\"]?\s*\|\s*(?:sudo\s+)?chpasswd\b"),
    ),
    # PHP's `define('DB_PASSWORD', 'X')` (WordPress' configuration).
    (
        "credential",
        re.compile(
            r"(?i)\bdefine\(\s*['\"]\w*(?:password|passwd|secret|token|api_?key)\w*['\"]\s*,\s*['\"](?P<value>[^'\"]{4,})['\"]"
        ),
    ),
    # "I reset the admin pw to X", "changed the password to X": the value a password was set to.
    (
        "credential",
        re.compile(
            r"(?i)\b(?:set|reset|changed?|updated?|rotated?)\s+(?:the\s+|my\s+|our\s+)?(?:[\w-]+\s+){0,2}"
            r"(?:password|passwd|pwd|pw|passphrase)\s+to\s+['\"`]?(?P<value>(?=\S*[\d!#$%&*?@])[^\s'\"`,;]{6,})"
        ),
    ),
    # A password in a note in Japanese, Chinese or Korean ("パスワードは「X」です", "密码：X", "비밀번호: X"): the value
    # after the word, its particle or colon; printable ASCII with a letter or digit (a sentence goes on in the script).
    (
        "credential",
        re.compile(
            r"(?:パスワード|暗証番号|密码|密碼|口令|비밀번호|암호)\s*(?:は|是|为|為|는|은)?\s*[:：]?\s*[「『\"'“]?"
            r"(?P<value>(?=[!-~]*[A-Za-z0-9])[!-~]{4,}?)(?=[」』\"'”、。，,]|\s|$|[^!-~])"
        ),
    ),
    # Redis' own directives for its password (`requirepass X`, a replica's `masterauth X`).
    ("credential", re.compile(r"(?im)^\s*(?:requirepass|masterauth)\s+['\"]?(?P<value>[^\s'\"]{4,})")),
    # A Terraform state's generated password: `"result"` of a `random_password` resource.
    (
        "credential",
        re.compile(r'"type"\s*:\s*"random_password"[\s\S]{0,3000}?"result"\s*:\s*"(?P<value>(?:[^"\\\n]|\\.){4,})"'),
    ),
    # A wallet's seed phrase: 12 to 24 words after its name.
    (
        "credential",
        re.compile(
            r"(?i)\b(?:mnemonic|seed\s+phrase|recovery\s+phrase|secret\s+(?:recovery\s+)?phrase|backup\s+phrase)\b"
            r"[^\n:=]{0,20}[:=]\s*['\"]?(?P<value>(?:[a-z]{3,8}\s+){11,23}[a-z]{3,8})\b"
        ),
    ),
    # A password or token in a note in Japanese (トークン), Hindi, Hebrew or Greek: the first ASCII word after the
    # credential word (only that script's words between), letters and digits both.
    (
        "credential",
        re.compile(
            r"(?i)(?:トークン|シークレット|アクセスキー|APIキー|토큰|令牌|टोकन|पासवर्ड|कूटशब्द|סיסמ\w*|הסיסמה|טוקן|"
            r"κωδικ\w*|συνθηματικ\w*|διακριτικ\w*)[^\n!-~]{0,40}?[:：]?\s*"
            r"(?P<value>(?=[!-~]*[A-Za-z])(?=[!-~]*\d)[!-~]{6,}?)(?=[\s、。，,]|$)"
        ),
    ),
    # A command that prints a named secret, and the value alone on the next line (`terraform output -raw
    # admin_password`, `vault kv get -field=password …`, `gcloud secrets versions access latest --secret=db`).
    (
        "credential",
        re.compile(
            r"(?im)(?:\bterraform\s+output\s+(?:-raw\s+|-json\s+)?\S*(?:passw|secret|token|key)\S*|"
            r"\bvault\s+(?:kv\s+)?(?:get|read)\s+[^\n]*-field=\S*(?:passw|secret|token|key)\S*[^\n]*|"
            r"\bgcloud\s+secrets\s+versions\s+access\b[^\n]*|"
            r"\baws\s+secretsmanager\s+get-secret-value\b[^\n]*--output\s+text[^\n]*|"
            r"\bprintenv\s+\S*(?:PASSW|SECRET|TOKEN|KEY)\S*)[ \t]*\n(?P<value>[^\s]{6,})[ \t]*$"
        ),
    ),
    # A `.netrc` line: `machine HOST login USER password X`.
    ("netrc password", re.compile(r"\bmachine\s+\S+\s+(?:login\s+\S+\s+)?password\s+(?P<value>\S{3,})")),
    # XML: an element named for a credential (`<password>X</password>`), and an `<add key="…Password" value="X"/>`.
    (
        "credential",
        re.compile(
            r"(?i)<(?P<tag>[\w:.-]*(?:password|passwd|secret|token|api[_-]?key)[\w:.-]*)>(?P<value>[^<\s]{4,})</(?P=tag)>"
        ),
    ),
    (
        "credential",
        re.compile(
            r"(?i)\bkey=\"[^\"]*(?:password|passwd|secret|token|api[_-]?key)[^\"]*\"\s+value=\"(?P<value>[^\"]{4,})\""
        ),
    ),
    # PowerShell's plain-text password to a SecureString.
    ("credential", re.compile(r"(?i)\bConvertTo-SecureString\s+(?:-String\s+)?['\"](?P<value>[^'\"]{4,})['\"]")),
]
# A cookie whose name says it holds a session or a credential (`sessionid=…`, `_gitlab_session=…`, `csrftoken=…`), on
# a line about cookies (`Cookie:`, `Set-Cookie:`, `curl -b`, `--cookie`).
COOKIE_LINE = re.compile(r"(?i)\bcookie\b|\s-b\s|--cookie\b")
SESSION_COOKIE = re.compile(
    r"(?i)(?<![\w.-])[\w.-]*(?:sess|sid|auth|token|csrf|jwt|remember)[\w.-]*="
    # a token's characters only, to its end (not `test-session-$(date +%s)`, not `<your_session_secret>`)
    r"(?P<value>(?=[^\s;'\",&]*\d)(?=[^\s;'\",&]*[A-Za-z])[A-Za-z0-9%._~+/=-]{16,})(?=[\s;'\",&]|$)"
)
# `password=...`, `api key is ...`, `token: ...`: the value after a credential word.
ASSIGNED_SECRET = re.compile(
    r"(?i)(?:(?<![a-z])(?P<word>password|passwd|pass|pwd|pw|passphrase|passwort|kennwort|contrase[ñn]a|mot de passe|"
    r"senha|wachtwoord|l[öo]senord|salasana|has[łl]o|[şs]ifre(?:si)?|пароль|"
    r"secret|token|api[_ -]?key|apikey|access[_ -]?key|auth|dsn|"
    r"credentials?|private[_ -]?key|client[_ -]?secret|bearer)"
    # ... or the end of a longer name (`dbPassword`, `PGPASSWORD`, `authToken`, `clientSecret`): only the long words
    r"|(?<=[a-z0-9])(?P<glued>password|passwd|passphrase|secret|token|apikey)"
    # ... or a key named for what it protects (`SECRET_KEY`, `ENCRYPTION_KEY`, `LICENSE_KEY`, `secret_key_base`)
    r"|(?<![a-z])(?P<named>(?:secret|encryption|signing|license|master|private|session|app|client)[_ -]?key"
    r"(?:[_ -]?base)?))\b"
    # a key in quotes (`"password": "…"`, `'password' => '…'`, `\"password\":\"…\"` in a logged JSON string)
    r"(?:\\?['\"])?"
    # "the secret for the smoke bucket is X": a short qualifier between the word and its value
    r"(?:\s+(?:for|of|to|on|in|für|fuer|de|du|des|da|do|dos|das|del|della|dello|dei|voor|van|dla|för|för)\s+"
    r"[\w .-]{1,40}?)?"
    # ... and the verbs and colons that give it, in the languages teams write notes in
    r"(?:\s+(?:is|was|ist|lautet|es|est|é|è|är|jest|är)(?!\w)|\s+(?:=>|[=:])|\s*(?:=>|[:=]))"
    # a quoted value is taken whole, spaces and punctuation included (`"correct horse battery staple"`)
    # on the same line: `KEY=` with nothing after it is empty, not the next line's text
    r"[^\S\n]*(?:\\?(?P<quote>['\"`])(?P<quoted>[^'\"`\\\n]{4,200})\\?(?P=quote)|\\?['\"`]?(?P<value>[^\s'\"`,;\\]{6,}))"
)
# A value after a credential name that is no secret: a reference to one (`${DB_PASSWORD}`, `$TOKEN`, `%NPM_TOKEN%`,
# `os.environ["X"]`, `process.env.X`, `settings.SECRET`), a placeholder (`<YOUR_TOKEN>`, `********`,
# `your-api-key-here`), a type (`str`, `Optional[str]`) or a path to a file that holds it.
_NOT_A_VALUE = re.compile(
    r"(?i)^(?:\$\{?\{?[\w.\s]+\}?\}?|%\w+%|[A-Za-z_][A-Za-z_]*\d?(?:\.[A-Za-z_][A-Za-z_]*\d?)+(?:[\[(].*)?|\w+[\[(].*|"
    r"<[^>]*>?|[*x•.]{3,}|[\w-]{0,8}(?:\.{3}|…)|.*(?:your[_ -]?|[_-]here\b|placeholder|xxxx).*|"
    r"(?:~|\.{1,2})?/\S*|[a-z]:\\\S*|!\w+|"
    # a template's expression (`{{ vault_db_password }}`, `{{resolve:secretsmanager:…}}`), a command's output
    # (`$(cat /run/secrets/db)`), a call (`std::env::var(`), a lower-case store path (`kv/data/api:token`), a value
    # shown hidden (`(sensitive value)`, `(hidden)`), a PowerShell prompt for one (`Read-Host`)
    r"\{\{.*|\{%.*|\$\(.*|(?:[A-Za-z_]\w*(?:::|\.|->))+[A-Za-z_]\w*\(.*|[a-z0-9_.-]+(?:/[a-z0-9_.-]+)+(?::[a-z_]+)?|"
    r"\((?:sensitive|hidden|redacted|masked|known|not|none|empty)\b.*|(?:get|read|convertto|import)-[a-z]\w+|"
    r"(?:optional\[)?(?:str|string|secretstr|bytes|int|none|null|true|false)\]?)$"
)
# Words that describe a credential rather than being it, as the last part of a hyphenated value ("the password is
# case-sensitive", "the token is JWT-based").
_DESCRIPTIVE_PART = re.compile(
    r"(?i)-(?:based|encoded|hashed|sensitive|insensitive|protected|only|safe|specific|free)$"
)
# A name given a value inside one token (`GH_TOKEN=ghp_…`, `correlation_id=QDG7…`, `code_challenge_method=S256`): the
# value is what is judged, the name stays.
# (a name is short and reads as one: base64 that ends in `==` is no name and its value)
_VARIABLE_NAME = re.compile(r"[A-Za-z_][\w.-]{0,40}=(?=[^=]{4})")
LONG_TOKEN = re.compile(r"(?<![\w/.-])[A-Za-z0-9_+/=-]{20,}(?![\w/.-])")
# In a text that talks about credentials, a longish token mixing letters and digits is the credential.
CREDENTIAL_WORDS = re.compile(
    r"(?i)\b(?:key|token|secret|password|passwd|pwd|pw|passwort|credential|creds|api|auth|bearer|login|dsn"
    # a personal access token, a shared-access signature, one-time and signing secrets; and the same words in the
    # languages teams write in (Schlüssel, Kennwort, clé, jeton, clave, contraseña, chave, senha, sleutel)
    r"|pat|sas|otp|totp|hmac|jwt|passkey|passphrase|kennwort|schl[üu]ssel|zugangsdaten|cl[ée]|jeton|clave|"
    r"contrase[ñn]a|chave|senha|sleutel|wachtwoord|keypair|privkey|mnemonic)s?\b"
)
CONTEXT_TOKEN = re.compile(
    r"(?<![\w/.@:-])(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{12,}(?![\w/.@-])"
)
# ... and so is a shorter word that mixes letters, digits and punctuation like a typed password (`Tr0ub4dor&3`).
# The look-aheads read at most a password's length (128): unbounded, a run of `$($($(` made every `(` a start that
# read to the end of the run (time in the square of its length).
PASSWORD_TOKEN = re.compile(
    r"(?<![^\s'\"`(\[])(?=[^\s'\"`]{0,128}\d)(?=[^\s'\"`]{0,128}[A-Za-z])(?=[^\s'\"`]{0,128}[!#$%&*+?^~|])"
    r"[^\s'\"`]{8,}(?<![.,;:!?)\]])"
)
# `admin/Gr4fana!2026`, `loader / S3cret99`: a user name, a slash and a password-looking word.
USER_PASS = re.compile(r"(?<![\w/.-])[A-Za-z][\w.-]{0,31}\s?/\s?(?P<pw>[^\s/'\"`]{6,})")


def _password_like(word: str) -> bool:
    """Letters and digits, and a symbol or mixed case; not a file name or a dotted name."""
    if len(word) < 6 or "." in word or not re.search(r"\d", word) or not re.search(r"[A-Za-z]", word):
        return False
    return bool(re.search(r"[!#$%&*+?^~@|]", word)) or (
        bool(re.search(r"[A-Z]", word)) and bool(re.search(r"[a-z]", word))
    )


# An HTML character reference (`&#39;`, `&#x27;`, `&amp;`): markup's spelling of one character, not a password's.
_CHAR_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,7});")


def _strong_password(tok: str) -> bool:
    # a slash: a path or a URL; brackets or `=`: code or a setting
    if "/" in tok or re.fullmatch(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", tok) or re.search(r"[()=<>{}]", tok):
        return False
    tok = _CHAR_REFERENCE.sub("", tok)  # `O&#39;Reilly` is O'Reilly
    return all(re.search(p, tok) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[!#$%&*?^~@]"))


# Values after "password is" that describe the password rather than being it.
_DESCRIPTIVE = frozenset(
    """stored kept saved managed rotated shared handled available located required needed missing set unset none empty
    blank wrong correct invalid valid expired same different changed secret hidden masked there here now also not
    never only from via with in at on the a an our your their this that its provided configured defined listed
    documented known unknown inside elsewhere attached below above""".split()  # noqa: SIM905
)
_PASSWORD_WORDS = re.compile(
    r"(?i)^(?:password|passwd|pwd|pw|passphrase|passwort|kennwort|contrase[ñn]a|mot de passe|senha|wachtwoord|"
    r"l[öo]senord|salasana|has[łl]o|пароль)$"
)


# A hex digest (a commit id, a content hash) or a UUID, and the words that name one just before it.
_HEX_OR_UUID = re.compile(r"[0-9a-f]{7,64}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DIGEST_BEFORE = re.compile(
    r"(?i)\b(?:commit|merge|branch|tag|ref|sha\d*|hash|digest|checksum|etag|ids?|uuid|guid|rev(?:ision)?|request|trace|"
    r"span|build|version|object|blob|tree|record|md5|crc\d*|event|fingerprint)(?:[_-]?ids?)?\b[\s:=#'\"`-]*"
    # up to two words between, none of them a credential word (`wandb login <hex>` after "re-run" is a key)
    r"(?:(?!(?:key|token|secret|passw(?:or)?d|pwd|pw|credentials?|creds|api|auth|bearer|login|dsn)s?\b)\S+\s+){0,2}$"
)
# Long base64 that is public by what stands before it or how it starts: a subresource-integrity or npm `integrity`
# hash (`sha512-…`), a go.sum hash (`h1:…`), a data URL's payload (`;base64,…`), an SSH public key (`ssh-ed25519 AAAA…`,
# the wire format's `AAAA` start), an image's own bytes (PNG, JPEG, GIF); and public object ids (Stripe's `pi_`, `evt_`,
# `cus_`: their secret keys are `sk_`/`rk_`, caught by name).
_PUBLIC_BEFORE = re.compile(
    r"(?:\bh1:|;base64,|\b(?:SHA256|SHA1|MD5):|\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-\S+|sk-\S+@openssh\.com) |"
    # a key said to be public (WireGuard's `PublicKey = …`, `public key: …`), minisign's `-P <public key>`
    r"(?i:\bpublic[_ -]?key\s*[:=]\s*[\"']?)|\bminisign\b[^\n]{0,200}\s-P\s+)$"
)
_PUBLIC_START = re.compile(
    # ... and a PEM certificate or public key in base64 (a kubeconfig's `certificate-authority-data`)
    r"(?:sha(?:1|256|384|512)-|AAAA[BCE][0-9][A-Za-z]|iVBORw0KGgo|/9j/|R0lGOD|H4sI|LS0tLS1CRUdJTiBDRVJUSUZJQ0FU|"
    r"LS0tLS1CRUdJTiBQVUJMSUMg|"
    r"(?:pi|ch|cus|evt|in|sub|price|prod|req|txn|po|re|seti|src|card|ba|acct|cs|pm|ii|il|si|tr|py|prv|ipi)_[A-Za-z0-9]{14,}$)"
)


def _public_encoding(text: str, start: int, tok: str) -> bool:
    return bool(
        _PUBLIC_START.match(tok) or _PUBLIC_BEFORE.search(text[max(0, start - 40) : start]) or _encoded_document(tok)
    )


def _encoded_document(tok: str) -> bool:
    """Base64 of a JSON document that names no credential (a JWT's header, a Kafka message's value): data, not a
    key. A key's bytes do not decode to `{"alg": …}`; `user:password` (Basic) or a config with a password does not
    count."""
    if not tok.startswith(("eyJ", "W3")):  # `{"` and `[` in base64
        return False
    try:
        raw = base64.b64decode(tok.replace("-", "+").replace("_", "/") + "=" * (-len(tok) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    return raw.isprintable() and not re.search(r"(?i)passw|secret|token|api_?key|private|credential|auth", raw)


# A token that names a thing rather than opening it: an id given under its name (`correlation_id=…`, `"tenantId":
# "…"`, `x-amz-id-2: …`, `Idempotency-Key: …`, `zone_id = "…"`, `"reference": "…"`, an action or cache key), unless
# the name says secret (`secret_id`, `token_id`).
_ID_BEFORE = re.compile(
    r"(?i)(?<![\w-])(?P<name>[\w-]{0,40}?(?:id|ids|uuid|guid|ref|reference|idempotency[_-]?key|action\s+key|cache\s+key|"
    r"aaguid|etag|digest|checksum|sha\d*|commit|revision)(?:-\d+)?)[\"']?\s*[:=]?\s*[\"']?$"
)


def _named_id(text: str, start: int) -> bool:
    m = _ID_BEFORE.search(text[max(0, start - 50) : start])
    return bool(m) and not re.search(r"(?i)secret|token|passw|private|api[_-]?key|access[_-]?key", m.group("name"))


# Tokens that are no credential by their shape: a placeholder of one repeated character (`glpat-xxxxxxxxxxxxxxxxxxxx`,
# `ghp_XXXX…`), a version with build metadata (`2.14.0+20240512.sha.0392458`), a CSS module's class
# (`Button_primary__3xK9f`), an alphabet (`ABCDEFGHIJKLMNOPQRSTUVWXYZ234567`).
_VERSION = re.compile(r"v?\d+\.\d+\.\d+(?:[-+][\w.+-]+)?")
_CSS_MODULE = re.compile(r"[A-Za-z][\w-]*__[A-Za-z0-9_-]{5,8}")


def _placeholder(tok: str) -> bool:
    """One character repeated after the prefix (`glpat-xxxx…`, `ghp_XXXX…`): what a vendor's docs print, never issued.
    Vendors' documented example keys (`AKIAIOSFODNN7EXAMPLE`) stay redacted by decision: they are what people paste
    as "a key" in tests and notes, and redacting a public example costs nothing."""
    return len(set(re.sub(r"[-_.]", "", re.sub(r"^(?:[A-Za-z]{2,8}[_-]){1,2}", "", tok)))) <= 2


def _shape_not_secret(tok: str) -> bool:
    if _placeholder(tok) or _VERSION.fullmatch(tok) or _CSS_MODULE.fullmatch(tok):
        return True
    steps = sum(ord(b) - ord(a) == 1 for a, b in zip(tok, tok[1:], strict=False))
    return steps >= 0.6 * (len(tok) - 1)


# A repository's action or package at a ref (`login-action@v3`, `setup-node@8f4b2c1`).
_ACTION_REF = re.compile(r"[\w.-]+@(?:v?\d[\w.-]*|[0-9a-f]{7,40}|main|master|latest)")
# `git log` lines: a commit id, then its message.
_COMMIT_LINE = re.compile(r"(?m)^\s*(?:commit\s+|\*\s+)?[0-9a-f]{7,40}\s+(?=[A-Za-z(])")


def _session_cookies(text: str) -> list[tuple[str, int, int]]:
    """Session and credential cookies on the lines that speak of cookies (each line once, found by its keyword first:
    no pattern scans a long line from every position)."""
    spans, done = [], -1
    for hit in COOKIE_LINE.finditer(text):
        if hit.start() < done:
            continue
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        done = end = len(text) if end < 0 else end
        spans += [
            ("session cookie", start + m.start("value"), start + m.end("value"))
            for m in SESSION_COOKIE.finditer(text, start, end)
        ]
    return spans


def _resource_name(value: str) -> bool:
    """A hyphenated lower-case name whose every part holds a word (`basic-auth`, `oauth2-proxy`), not `abc-123-x9`."""
    return bool(re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", value)) and all(
        re.search(r"[a-z]{3}", part) for part in value.split("-")
    )


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def _looks_random(tok: str) -> bool:
    """A long token with mixed character classes and high entropy: likely a key, not a word or a path."""
    if tok.startswith(("http", "www")):
        return False
    classes = sum(bool(re.search(p, tok)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    if classes < 3 or _entropy(tok) < 3.8:
        return False
    # Words, CamelCase names and numbers joined by separators (`NODE_OPTIONS=--max-old-space-size=8192`,
    # `X-Api-Version=2024-01`, `src/UserProfile2/index`) are settings or paths, not keys: a key has a part that mixes
    # cases and digits at random (`wJalrXUtnFEMI/K7MDENG/...`).
    parts = [p for p in re.split(r"[-_=+/.]+", tok) if p]
    return not all(_PLAIN_PART.fullmatch(p) or _camel_name(p) for p in parts)


# Each alternative reads a part one way only (a capital starts the next word), so a long run of letters followed by
# what fails is rejected in one pass: `(?:[A-Z]?[a-z]+)+` tried every split of it (55 s for one corpus).
_PLAIN_PART = re.compile(r"[a-z]+|[A-Z]+|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*\d*|\d+|[A-Za-z]{1,2}\d{1,2}")


# A name made of words with numbers between them (`buildWindows64Player`, `enableHttp2Push`, `IPv6OnlyMode`): each
# word at least two lower-case letters after its capitals, numbers short, the pieces long on average. A key's
# characters fall at random and leave lone letters (`wJalrXUtnFEMI` has `w`, `X`, `F`...).
_CAMEL_PIECE = re.compile(
    r"[A-Z]*[a-z]{2,}|[A-Z]{2,}(?![a-z])|[A-Z]{2,}[a-z](?=\d)|[A-Z](?=\d)|\d{1,4}[a-z]{0,2}(?![a-z])"
)


def _camel_name(part: str) -> bool:
    pieces = _CAMEL_PIECE.findall(part)
    return "".join(pieces) == part and len(part) >= 3 * len(pieces)


def _url_secrets(text: str) -> list[tuple[str, int, int]]:
    """Secrets carried by a URL: a webhook's whole path, a credential-named query value or path segment, and a
    random-looking path segment (mixed case and digits; a hex commit id or a UUID is not one)."""
    spans = [("webhook URL", m.start("path"), m.end("path")) for m in WEBHOOK_URL.finditer(text)]
    spans += [
        ("URL credential", m.start("value"), m.end("value"))
        for m in URL_SECRET_PARAM.finditer(text)
        if not _NOT_A_VALUE.match(m.group("value"))
    ]
    spans += [("URL credential", m.start("value"), m.end("value")) for m in URL_SECRET_SEGMENT.finditer(text)]
    if "/" in text:
        for u in URL_RE.finditer(text):
            for m in URL_RANDOM_SEGMENT.finditer(u.group(0)):
                seg = m.group(0)
                # words glued in CamelCase (`InstallingTheCLIOnLinux2024`) are a page name, not a token;
                # _looks_random asks for lower case, upper case and digits
                wordy = sum(len(w) for w in re.findall(r"[a-z]{3,}", seg))
                if wordy < 0.4 * len(seg) and _looks_random(seg):
                    spans.append(("URL credential", u.start() + m.start(), u.start() + m.end()))
    return spans


# A dream scans the same texts again and again: assess() reads every evidence excerpt of a draft and redact_draft()
# then reads them all again, and one pattern's excerpts and wording recur in many sessions (at 10,000 sessions
# finalize made 11,700 scans, a fifth of its CPU). The scan is a pure function of the text, so inside scan_memo()
# (a batch of the dream, its finalize) a text's spans are kept until the block ends. Only there: the texts scanned
# are the ones that may hold a secret, and a process-wide cache would keep them in a long-lived web or worker
# process. A text longer than SCAN_CACHE_CHARS (a transcript's line, a skill's body) is scanned each time, and the
# memo starts again after SCAN_CACHE texts, so what it holds stays bounded.
SCAN_CACHE = 8192
SCAN_CACHE_CHARS = 1000
_memo: ContextVar[dict[str, tuple] | None] = ContextVar("secret_scan_memo", default=None)


@contextmanager
def scan_memo():
    """Keep each short text's secret spans until the block ends (nested blocks share the outer memo)."""
    token = _memo.set({}) if _memo.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _memo.reset(token)


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """(what, start, end) of every secret-looking span in the text."""
    if not text:
        return []
    memo = _memo.get()
    if memo is None or len(text) > SCAN_CACHE_CHARS:
        return _scan(text)
    spans = memo.get(text)
    if spans is None:
        if len(memo) >= SCAN_CACHE:
            memo.clear()
        spans = memo[text] = tuple(_scan(text))
    return list(spans)


# A certificate or a public key in PEM: public by what it is, however random its lines look.
PUBLIC_PEM = re.compile(
    r"-----BEGIN (?:TRUSTED )?(?:CERTIFICATE|PUBLIC KEY|RSA PUBLIC KEY|X509 CRL|CERTIFICATE REQUEST|NEW CERTIFICATE "
    r"REQUEST|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|SSH2 PUBLIC KEY)-----[\s\S]{0,20000}?-----END [A-Z0-9 ]{3,40}-----"
)


def _no_password(credentials: str) -> bool:
    """`user:${DB_PASSWORD}`, `app:********`: a URL's password that is a reference to one or already masked."""
    password = credentials.partition(":")[2]
    return bool(_NOT_A_VALUE.match(password))


def _scan(text: str) -> list[tuple[str, int, int]]:
    spans = _scan_all(text)
    if "-----BEGIN" in text:
        public = [(m.start(), m.end()) for m in PUBLIC_PEM.finditer(text)]
        spans = [sp for sp in spans if not any(a <= sp[1] and sp[2] <= b for a, b in public)]
    return spans


def _scan_all(text: str) -> list[tuple[str, int, int]]:
    spans: list[tuple[str, int, int]] = []
    for name, pat in SECRET_PATTERNS:
        spans += [
            (name, m.start(), m.end())
            for m in pat.finditer(text)
            if not (name == "URL credentials" and _no_password(m.group(0)))
            and not (name != "private key" and _placeholder(m.group(0)))
        ]
    spans += _url_secrets(text)
    for name, pat in POSITIONAL_SECRETS:
        spans += [
            (name, m.start("value"), m.end("value"))
            for m in pat.finditer(text)
            if not _NOT_A_VALUE.match(m.group("value"))
        ]
    spans += _session_cookies(text)
    for m in ASSIGNED_SECRET.finditer(text):
        if m.group("quoted") is not None:
            value = m.group("quoted").strip()
            if len(value) >= 4 and not value.startswith(REDACTED) and not _NOT_A_VALUE.match(value):
                spans.append(("credential", m.start("quoted"), m.end("quoted")))
            continue
        # read without the punctuation that ends its sentence ("the password is rotated."); the span keeps it
        value = m.group("value").rstrip(".!?)")
        if (
            value.startswith(REDACTED)
            or value.lower() in ("required", "needed", "missing")
            or _NOT_A_VALUE.match(value)
            or _NOT_A_VALUE.match(m.group("value"))  # `sk-...`: the ellipsis is the placeholder
        ):
            continue
        if (m.group("glued") or m.group("named")) and value.isdigit():
            continue  # `max_token=100000`: a count, not a credential
        if _DESCRIPTIVE_PART.search(value):
            continue
        word = m.group("word") or m.group("glued") or m.group("named")
        # `auth: oauth2-proxy`, `auth-secret: basic-auth`: the name of another resource, when every part is a word
        if _resource_name(value) and not _PASSWORD_WORDS.match(word):
            continue
        # "the token is stored in vault" is not a secret: require a value that is not an ordinary word, except after
        # a password word, where a plain word is the password ("the admin password is swordfish", "pw=swordfish")
        # unless it only describes it ("the password is rotated monthly").
        if (value.isalpha() and value.islower()) and (
            not _PASSWORD_WORDS.match(word) or value in _DESCRIPTIVE or value.endswith(("ed", "ing", "ly"))
        ):
            continue
        spans.append(("credential", m.start("value"), m.end("value")))
    for m in LONG_TOKEN.finditer(text):
        tok, start = m.group(0), m.start()
        if tok.startswith(("http", "www")):
            continue  # an address written without its punctuation, not a key
        # `GH_TOKEN=ghp_...`: the value is the secret, the variable's name stays (a lesson that says which variable
        # to set is still a lesson once its value is gone).
        named = _VARIABLE_NAME.match(tok)
        if named and not _looks_random(tok[: named.end() - 1]):
            tok, start = tok[named.end() :], start + named.end()
        elif tok.startswith("="):  # `value(base64)=eyJ…`: the name ended before the token
            tok, start = tok.lstrip("="), start + len(tok) - len(tok.lstrip("="))
        if (
            _looks_random(tok)
            and not _public_encoding(text, start, tok)
            and not _named_id(text, start)
            and not _shape_not_secret(tok)
        ):
            spans.append(("high-entropy token", start, m.end()))
    # Whatever the words around it: a word with upper and lower case, a digit and a symbol is a typed password
    # (`Spring2026!Fernhill`, `support-admin / W1nter#Desk`), never a name, a path or an address.
    for m in PASSWORD_TOKEN.finditer(text):
        tok = m.group(0)
        if _strong_password(tok):
            spans.append(("credential", m.start(), m.end()))
    if CREDENTIAL_WORDS.search(text):
        commits = list(_COMMIT_LINE.finditer(text)) if "\n" in text else []
        for m in CONTEXT_TOKEN.finditer(text):
            tok = m.group(0)
            if re.fullmatch(r"[a-z]+(?:[-_][a-z0-9]+)*", tok) or _entropy(tok) < 3.0:
                continue
            # near a credential word, a digest or an id named so just before it is still no credential (`commit
            # 3f2a9b7`, `request id <uuid>`; `staging key <hex>`, `login <hex>` stay one), nor is a name like
            # `oauth2-proxy`
            if (
                _resource_name(tok)
                or (_HEX_OR_UUID.fullmatch(tok) and _DIGEST_BEFORE.search(text[max(0, m.start() - 60) : m.start()]))
                or _named_id(text, m.start())
                or _shape_not_secret(tok)
                or _public_encoding(text, m.start(), tok)
                or any(c.start() <= m.start() < c.end() for c in commits)
            ):
                continue
            spans.append(("credential", m.start(), m.end()))
        for m in USER_PASS.finditer(text):
            pw = m.group("pw").rstrip(".,;:!?)]")
            # (`docker/login-action@v3` is an action at a version; `public key: yBEB…Kg/dILZ…=` one public key)
            if _password_like(pw) and not _ACTION_REF.fullmatch(pw) and not _public_encoding(text, m.start(), pw):
                spans.append(("credential", m.start("pw"), m.start("pw") + len(pw)))
        for m in PASSWORD_TOKEN.finditer(text):
            tok = m.group(0)
            if "/" in tok or re.fullmatch(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", tok) or _shape_not_secret(tok):
                continue
            spans.append(("credential", m.start(), m.end()))
    return spans


def has_secret(text: str) -> bool:
    return bool(find_secrets(text))


def redact(text: str | None) -> str | None:
    """The text with every secret-looking span replaced by [REDACTED]."""
    if not text:
        return text
    spans = sorted(find_secrets(text), key=lambda s: (s[1], -s[2]))
    out, pos = [], 0
    for _, start, end in spans:
        if start < pos:  # overlapping match already replaced
            continue
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_window(text: str, start: int, end: int, margin: int = 8192) -> str:
    """``text[start:end]`` with its secrets replaced by [REDACTED], read with ``margin`` characters around it so that
    a secret cut by the window's edge is still found (and its part inside replaced): a page that shows 20,000
    characters of a 5 MB event scans those, not the 5 MB (seconds)."""
    lo, hi = max(0, start - margin), min(len(text), end + margin)
    spans = sorted(((a + lo, b + lo) for _, a, b in find_secrets(text[lo:hi])), key=lambda s: (s[0], -s[1]))
    out, pos = [], start
    for a, b in spans:
        if b <= pos or a >= end:
            continue
        if a > pos:
            out.append(text[pos:a])
        out.append(REDACTED)
        pos = min(b, end)
    out.append(text[pos:end])
    return "".join(out)


def secret_kinds(text: str) -> list[str]:
    return sorted({name for name, _, _ in find_secrets(text)})


def redact_value(value, key: str = ""):
    """A JSON value with every secret replaced by [REDACTED], read with the names it is given under: a string is
    redacted as text, and also whole when its key, or the name beside it (`{"name": "DB_PASSWORD", "value": ...}`),
    makes it a credential (`{"password": "lanternfish42X"}`: the value alone reads as a word)."""
    if isinstance(value, str):
        if not value:
            return value
        if key and not has_secret(value) and has_secret(f'"{key}": "{value}"'):
            return REDACTED
        return redact(value)
    if isinstance(value, dict):
        name = next((value[k] for k in ("name", "key", "Name", "Key") if isinstance(value.get(k), str)), "")
        out = {}
        for k, v in value.items():
            # A key is text too (`{"DJANGO_SECRET_KEY=...": ""}`, a header line as a key): redacted like any text; two
            # keys that redact alike keep distinct names, so no value is lost to another's.
            safe = redact(k) if isinstance(k, str) else k
            if safe in out:
                safe = f"{safe}#{len(out)}"
            if name and k in ("value", "Value") and isinstance(v, str) and v and has_secret(f"{name}={v}"):
                out[safe] = REDACTED
            else:
                out[safe] = redact_value(v, str(safe))
        return out
    if isinstance(value, list):
        return [redact_value(v, key) for v in value]
    return value
