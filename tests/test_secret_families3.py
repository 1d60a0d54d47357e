"""The families the third blind secret file found (tests/test_secret_blind3_probe.py), each tested with strings of its
own: secrets under names that do not say so (Redis directives, a Terraform random password's `result`, a value
printed on the line after the command that asked for it, a seed phrase, a keypair's hex), more vendor prefixes, and
notes in Japanese, Hindi, Hebrew and Greek; and what is no secret: references, templates, calls and substitutions
where a value would be, values shown hidden, placeholders and documented examples, ids given under their names,
commit lines, base64 of plain JSON, public keys, versions with build metadata, CSS module classes, alphabets and
actions at a ref."""

from __future__ import annotations

import base64
import json

import pytest

from reviews.analysis import risk

HEX64 = "9f2c4e1a7b3d5f60" * 4


@pytest.mark.parametrize(
    "text, secret",
    [
        ("# redis.conf\nrequirepass Zk8mQ2vL9xP4\nmaxmemory 2gb", "Zk8mQ2vL9xP4"),
        ("replicaof 10.2.0.4 6379\n  masterauth 'Wq7nR2tY5uI8'", "Wq7nR2tY5uI8"),
        (
            json.dumps(
                {"type": "random_password", "instances": [{"attributes": {"length": 24, "result": "Jk4#mQ9!vT2@pL7z"}}]}
            ),
            "Jk4#mQ9!vT2@pL7z",
        ),
        ("$ terraform output -raw api_token\nQ9mZ2kL7vX4pR8sT", "Q9mZ2kL7vX4pR8sT"),
        ("$ gcloud secrets versions access latest --secret=stripe-key\nrk9Lm2Qx7Vb4Nc1Z", "rk9Lm2Qx7Vb4Nc1Z"),
        ("$ vault kv get -field=password secret/db\nHq3Zt8Wm1Lp6", "Hq3Zt8Wm1Lp6"),
        (
            "seed phrase = gravity orbit velvet canyon pilot timber anchor frozen mango violet ribbon sturdy",
            "gravity orbit velvet canyon pilot timber anchor frozen mango violet ribbon sturdy",
        ),
        (f"node keypair (hex): {HEX64}", HEX64),
        ("curl -F token=gldt-Zq8vR3mT1yL0pQ7wX2nB https://gitlab.example/api", "gldt-Zq8vR3mT1yL0pQ7wX2nB"),
        ("RUNNER_TOKEN=glrt-Ab3Cd5Ef7Gh9Ij1Kl3Mn", "glrt-Ab3Cd5Ef7Gh9Ij1Kl3Mn"),
        (
            "client = Dropbox('sl." + "Ab3Cd5Ef7Gh9Ij1Kl3MnOp5Qr7St9Uv1Wx3Yz5Ab7Cd9Ef1Gh3Ij5Kl7Mn9Op1Qr3St5')",
            "sl.Ab3Cd5Ef7Gh9",
        ),
        ("ステージングのシークレットは Xy7kLm2Qp9 です。", "Xy7kLm2Qp9"),
        ("डेटाबेस का टोकन Ab12Cd34Ef है", "Ab12Cd34Ef"),
        ("הסיסמה של השרת היא Qw3rTy9Zx", "Qw3rTy9Zx"),
        ("Ο κωδικός του λογαριασμού είναι Pa55Word9x", "Pa55Word9x"),
        # base64 of an env file: its `==` padding makes no `name=value` of it
        (
            "echo " + base64.b64encode(b"DB_PASSWORD=Hq3Zt8Wm1Lp6Xr9\n").decode() + " | base64 -d > .env",
            base64.b64encode(b"DB_PASSWORD=Hq3Zt8Wm1Lp6Xr9\n").decode(),
        ),
        # decided: a vendor's documented example key stays redacted (it is what people paste as "a key")
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_secrets_under_names_that_do_not_say_so_are_redacted(text, secret):
    assert risk.has_secret(text)
    assert secret not in risk.redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # references, templates, calls and substitutions where a value would be
        "  ~ token = (sensitive value)\n    secret = (known after apply)",
        "private key: (hidden)",
        "api_token: \"{{ lookup('env', 'API_TOKEN') }}\"",
        'password: "{{ db_pass }}"',
        'export DB_PASSWORD="$(op read op://prod/db/password)"',
        'let secret = std::env::var("STRIPE_SECRET").unwrap();',
        'token = os.environ.get("GITHUB_TOKEN")',
        '$ redis-cli -a "$REDIS_AUTH" ping',
        "  --password string   password to use (prefer --password-stdin)",
        # shown masked, placeholders, documented examples
        "Server=db1;User Id=app;Password=******;TrustServerCertificate=True",
        "OPENAI_API_KEY=sk-proj-XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://api.example.net/v1/search?api_key=YOUR_API_KEY&q=x",
        # ids given under their names
        "request_id=Zk8mQ2vL9xP4Wn7Rt5Yu and token refresh ok",
        '{"tenant_id": "5c1e8a2b-9d4f-4e7a-8b3c-2f6d9e0a1b7c", "region": "eu-west-1"}',
        "< trace-id: 4bf92f3577b34da6a3ce929d0e0e4736\n< x-api-version: 2",
        "Idempotency-Key: 8f14e45f-ceea-467f-a0e6-a1b2c3d4e5f6 (the API key is in the vault)",
        # commit lines beside credential words
        "$ git log --oneline -2\n9fceb02d0ae598e95dc970b74767f19372d61af8 rotate the deploy token\n"
        "e83c5163316f89bfbde7d9ab23ca2e25604af290 fix password reset",
        # base64 of plain JSON, public keys and signatures
        "payload=" + base64.b64encode(b'{"order": 7, "state": "paid", "items": 3}').decode() + " (key=order-7)",
        'public_key = "q8V1cT3lK9mZ2xW7rB5nJ4hG6fD0sA1pL8kM3vN2bQ0="',
        "-----BEGIN PGP SIGNATURE-----\n\niQIzBAABCAAdFiEEq8V1cT3lK9mZ2xW7rB5nJ4hG6fD0sA1p\n=a1B2\n"
        "-----END PGP SIGNATURE-----",
        # shapes that are no credential
        "Deployed api 1.4.2+build.20241105.gabc1234 after the token rotation",
        '<span class="Card_title__Xy3Kq">API key settings</span>',
        "Crockford's alphabet is 0123456789ABCDEFGHJKMNPQRSTVWXYZ; tokens use it.",
        "- uses: docker/setup-buildx-action@v3\n  with:\n    password: ${{ secrets.REGISTRY_TOKEN }}",
    ],
)
def test_what_stands_where_a_secret_would_is_left_as_written(text):
    assert risk.redact(text) == text, risk.redact(text)
