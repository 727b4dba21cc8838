"""A labelled corpus for the redaction benchmark: code, logs, JSON and stack traces with secrets
and personal data planted at known offsets.

Deterministic (one seed), ASCII only, and built to resemble tool output: most of it is clean,
and the clean part carries the usual decoys (git hashes behind a label, UUIDs, long
identifiers, version strings, Luhn-invalid card-like numbers) so a detector that redacts
everything would be visible in the false-positive count. Every planted item carries its exact
span and its family, so recall is measured, not guessed.
"""

from __future__ import annotations

import base64
import random
import string
import urllib.parse
from dataclasses import dataclass, field

ALNUM = string.ascii_letters + string.digits
UPPER_B32 = string.ascii_uppercase + "234567"
HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"


@dataclass
class Label:
    start: int
    end: int
    family: str  # "secret" (in-the-wild token), "known" (registered value, some encoding), "pii"
    kind: str
    value: str


@dataclass
class Corpus:
    text: str
    labels: list[Label]
    known_values: list[str] = field(default_factory=list)  # what the run registers as secret


class _Builder:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.parts: list[str] = []
        self.size = 0
        self.labels: list[Label] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def plant(
        self, before: str, value: str, after: str, family: str, kind: str, label_value: str | None = None
    ) -> None:
        self.add(before)
        self.labels.append(Label(self.size, self.size + len(value), family, kind, label_value or value))
        self.add(value)
        self.add(after)

    def rand(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))


# -- in-the-wild secrets: formats taken from the providers' documented token shapes ----------


def _secrets(b: _Builder) -> list[tuple[str, str, str]]:
    """(kind, value, context template with {v}) for one of each kind, freshly random."""
    r = b.rand
    jwt_header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    jwt_body = (
        base64.urlsafe_b64encode(
            ('{"sub":"' + r(ALNUM, 10) + '","iat":' + str(b.rng.randrange(10**9, 2 * 10**9)) + "}").encode()
        )
        .rstrip(b"=")
        .decode()
    )
    jwt = f"{jwt_header}.{jwt_body}.{r(ALNUM + '-_', 43)}"
    return [
        ("aws-access-key-id", "AKIA" + r(UPPER_B32, 16), "aws_access_key_id = {v}\n"),
        ("aws-secret-access-key", r(B64, 40), "aws_secret_access_key = {v}\n"),
        ("github-pat", "ghp_" + r(ALNUM, 36), "git clone https://{v}@github.com/acme/private.git\n"),
        ("github-fine-grained-pat", "github_pat_" + r(ALNUM + "_", 82), 'export GH_TOKEN="{v}"\n'),
        ("gitlab-pat", "glpat-" + r(ALNUM + "-_", 20), "PRIVATE-TOKEN: {v}\n"),
        (
            "slack-bot-token",
            f"xoxb-{r(string.digits, 12)}-{r(string.digits, 12)}-{r(ALNUM, 24)}",
            '  "slack_token": "{v}",\n',
        ),
        (
            "slack-webhook",
            "https://hooks.slack.com/services/T" + r(UPPER_B32, 8) + "/B" + r(UPPER_B32, 8) + "/" + r(ALNUM, 24),
            "POST {v} 200\n",
        ),
        ("stripe-secret-key", "sk_live_" + r(ALNUM, 24), 'stripe.api_key = "{v}"\n'),
        ("openai-api-key", "sk-" + r(ALNUM, 20) + "T3BlbkFJ" + r(ALNUM, 20), "OPENAI_API_KEY={v}\n"),
        ("anthropic-api-key", "sk-ant-api03-" + r(ALNUM + "-_", 93) + "AA", "x-api-key: {v}\n"),
        ("gcp-api-key", "AIza" + r(ALNUM + "-_", 35), 'const key = "{v}";\n'),
        ("jwt", jwt, "Authorization: Bearer {v}\n"),
        ("npm-token", "npm_" + r(ALNUM, 36), "//registry.npmjs.org/:_authToken={v}\n"),
        ("pypi-token", "pypi-AgEIcHlwaS5vcmc" + r(ALNUM + "-_", 70), "password = {v}\n"),
        ("sendgrid-api-key", "SG." + r(ALNUM + "-_", 22) + "." + r(ALNUM + "-_", 43), 'SENDGRID_API_KEY="{v}"\n'),
        ("twilio-api-key", "SK" + r(HEX, 32), "twilio_key: {v}\n"),
        ("huggingface-token", "hf_" + r(string.ascii_letters, 34), "HF_TOKEN={v}\n"),
        ("digitalocean-pat", "dop_v1_" + r(HEX, 64), 'do_token = "{v}"\n'),
        ("generic-password", r(ALNUM, 6) + b.rng.choice("0123456789") + r(ALNUM, 7) + "!", 'db_password = "{v}"\n'),
        ("generic-api-key", r(ALNUM, 32), 'api_key: "{v}"\n'),
        ("high-entropy-token", r(ALNUM, 40), "session established sid={v} user=42\n"),
    ]


def _pem(b: _Builder) -> str:
    body = b.rand(B64, 64 * 20 + 24)
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join(lines)


# -- personal data ------------------------------------------------------------------------


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    digits = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        candidate = digits + check
        total = 0
        for i, ch in enumerate(reversed(candidate)):
            d = int(ch) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable")


def _iban(rng: random.Random) -> str:
    bban = "".join(rng.choice(string.digits) for _ in range(18))
    country = "DE"
    number = int("".join(str(int(c, 36)) for c in bban + country + "00"))
    check = 98 - number % 97
    return f"{country}{check:02d}{bban}"


def _pii(b: _Builder) -> list[tuple[str, str, str]]:
    rng = b.rng
    first = rng.choice(["alice", "bob", "carol", "dave", "erin", "frank", "grace"])
    card = _luhn_complete(rng.choice(["4", "51", "37"]), 16 if rng.random() < 0.8 else 15, rng)
    card = " ".join(card[i : i + 4] for i in range(0, len(card), 4)) if rng.random() < 0.5 else card
    return [
        (
            "email",
            f"{first}.{b.rand(string.ascii_lowercase, 5)}@{rng.choice(['example.com', 'corp.example.org', 'mail.test'])}",
            "From: {v}\n",
        ),
        (
            "phone",
            f"+1 {rng.randrange(200, 999)} {rng.randrange(200, 999)} {rng.randrange(1000, 9999)}",
            "contact phone {v}\n",
        ),
        (
            "ipv4",
            f"{rng.randrange(11, 223)}.{rng.randrange(0, 255)}.{rng.randrange(0, 255)}.{rng.randrange(1, 254)}",
            '{v} - - [10/Oct/2025:13:55:36] "GET /api HTTP/1.1" 200\n',
        ),
        ("ipv6", f"2001:db8:{rng.randrange(1, 0xFFFF):x}::{rng.randrange(1, 0xFFFF):x}", "client {v} connected\n"),
        ("credit-card", card, "charge card={v} amount=12.00\n"),
        ("iban", _iban(rng), "payout to {v}\n"),
    ]


# -- clean filler that looks like tool output ------------------------------------------------

_WORDS = [
    "model",
    "kernel",
    "tensor",
    "batch",
    "softmax",
    "compile",
    "autotune",
    "layer",
    "shape",
    "device",
    "stride",
    "block",
    "grid",
    "warp",
    "cache",
    "load",
    "store",
    "reduce",
]


def _code(b: _Builder) -> str:
    rng = b.rng
    name = "_".join(rng.choice(_WORDS) for _ in range(3))
    cls = "".join(w.capitalize() for w in rng.sample(_WORDS, 3))
    return (
        f"def {name}(x, dim={rng.randrange(-1, 4)}):\n"
        f'    """Compute the {rng.choice(_WORDS)} of x along dim."""\n'
        f"    y = torch.{rng.choice(['softmax', 'sum', 'mean', 'amax'])}(x, dim=dim)\n"
        f"    return {cls}.apply(y, block_size={rng.choice([64, 128, 256])})\n\n"
    )


def _log(b: _Builder) -> str:
    rng = b.rng
    return (
        f"2025-10-{rng.randrange(1, 28):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z "
        f"{rng.choice(['INFO', 'DEBUG', 'WARN'])} worker-{rng.randrange(16)} {rng.choice(_WORDS)} step={rng.randrange(10**6)} "
        f"loss={rng.random():.4f} took={rng.randrange(1, 900)}ms\n"
    )


def _json(b: _Builder) -> str:
    rng = b.rng
    uuid = f"{b.rand(HEX, 8)}-{b.rand(HEX, 4)}-4{b.rand(HEX, 3)}-a{b.rand(HEX, 3)}-{b.rand(HEX, 12)}"
    # Drawn in this order (the corpus is the same bytes for the same seed).
    kernel, rows, cols = rng.choice(_WORDS), rng.randrange(1, 4096), rng.randrange(1, 4096)
    major, minor, patch, ok = rng.randrange(3), rng.randrange(20), rng.randrange(50), rng.choice(["true", "false"])
    return f'{{"id": "{uuid}", "kernel": "{kernel}", "shape": [{rows}, {cols}], "version": "{major}.{minor}.{patch}", "ok": {ok}}}\n'


def _trace(b: _Builder) -> str:
    rng = b.rng
    return (
        "Traceback (most recent call last):\n"
        f'  File "/workspace/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py", line {rng.randrange(1, 400)}, in {rng.choice(_WORDS)}\n'
        f"    out = kernel(x, y)\n"
        f"RuntimeError: CUDA error: an illegal memory access was encountered ({rng.choice(_WORDS)})\n"
    )


def _decoy(b: _Builder) -> str:
    rng = b.rng
    choice = rng.randrange(4)
    if choice == 0:
        return f"commit {b.rand(HEX, 40)}\nAuthor: Dev <dev@users.noreply.invalid>\n"[:48] + "\n"
    if choice == 1:
        return f"sha256:{b.rand(HEX, 64)}\n"
    if choice == 2:
        bad = _luhn_complete("4", 16, rng)
        bad = bad[:-1] + str((int(bad[-1]) + 1) % 10)  # Luhn-invalid on purpose
        return f"order number {bad}\n"
    return f"torch_compile_inductor_max_autotune_gemm_backends = {rng.choice(['ATEN', 'TRITON'])}\n"


_FILLERS = (_code, _log, _log, _log, _json, _trace, _decoy)


def generate(size: int = 1_000_000, seed: int = 20251003, secret_every: int = 1500, known_values: int = 8) -> Corpus:
    """About `size` characters, with one planted item per `secret_every` characters on average."""
    b = _Builder(seed)
    known = [f"{b.rand(ALNUM, 12)}-{b.rand(ALNUM, 12)}" for _ in range(known_values)]
    next_plant = b.rng.randrange(secret_every)
    counter = 0
    while b.size < size:
        if b.size >= next_plant:
            counter += 1
            roll = b.rng.random()
            if roll < 0.6:
                kind, value, ctx = b.rng.choice(_secrets(b))
                before, after = ctx.split("{v}")
                b.plant(before, value, after, "secret", kind)
            elif roll < 0.65:
                body = _pem(b)
                b.plant(
                    "-----BEGIN RSA PRIVATE KEY-----\n",
                    body,
                    "\n-----END RSA PRIVATE KEY-----\n",
                    "secret",
                    "private-key",
                )
            elif roll < 0.8:
                kind, value, ctx = b.rng.choice(_pii(b))
                before, after = ctx.split("{v}")
                b.plant(before, value, after, "pii", kind)
            else:
                value = b.rng.choice(known)
                form = b.rng.choice(["plain", "base64", "hex", "url", "split"])
                if form == "plain":
                    shown = value
                elif form == "base64":
                    shown = base64.b64encode(value.encode()).decode()
                elif form == "hex":
                    shown = value.encode().hex()
                elif form == "url":
                    shown = urllib.parse.quote(value, safe="")
                else:
                    cut = b.rng.randrange(4, len(value) - 4)
                    shown = value[:cut] + "\n" + value[cut:]
                b.plant("config value: ", shown, "\n", "known", f"known-{form}", label_value=value)
            next_plant = b.size + b.rng.randrange(secret_every // 2, secret_every * 3 // 2)
        else:
            b.add(b.rng.choice(_FILLERS)(b))
    return Corpus("".join(b.parts), b.labels, known)
