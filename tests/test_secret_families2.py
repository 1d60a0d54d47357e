"""Secret families found by the second blind probe (tests/test_secret_blind2_probe.py), each tested with texts of
its own: passwords given to more tools, set "to" a value, in notes of other languages and scripts, vendor prefixes;
and what is public however random it looks (PEM certificates, fingerprints, named ids, masked or referenced values,
placeholders, an empty value at a line's end)."""

from __future__ import annotations

import pytest

from reviews.analysis import risk

SECRETS = [
    ("keytool -genkeypair -alias web -keystore web.p12 -keypass Vq3rT8wLz1", "Vq3rT8wLz1"),
    ("keytool -list -keystore ca.jks -srcstorepass Hn5kP2xQe7", "Hn5kP2xQe7"),
    ("zip -r -P Qm8vB2nXc4 dump.zip ./sql", "Qm8vB2nXc4"),
    ("7za x -pRt5yU8iO2p secrets.7z", "Rt5yU8iO2p"),
    ("az login --service-principal -u app-id -p Wx9cV3bN6m --tenant t1", "Wx9cV3bN6m"),
    ("psexec64 \\\\db02 -u ops -p Lk2jH7gF4d hostname", "Lk2jH7gF4d"),
    ("rabbitmqctl change_password billing Zx8cV5bN2m", "Zx8cV5bN2m"),
    ("net user backup_svc Pq4wE7rT1y /add /domain", "Pq4wE7rT1y"),
    ('echo "ci:Ty6uI9oP3a" | chpasswd', "Ty6uI9oP3a"),
    ("define('AUTH_SECRET', 'Gh4jK7lM2n');", "Gh4jK7lM2n"),
    ("I changed the db password to Bn3mQ8wE5r before the demo.", "Bn3mQ8wE5r"),
    ("Das Kennwort für die Staging-DB lautet Fr7tG2hJ9k.", "Fr7tG2hJ9k"),
    ("La password del server di test è Mn4bV7cX2z", "Mn4bV7cX2z"),
    ("A senha da VPN é Yt5rE8wQ1a", "Yt5rE8wQ1a"),
    ("Le mot de passe du serveur FTP est : Ui8oP3lK6j", "Ui8oP3lK6j"),
    ("Het wachtwoord van de testomgeving is Op9iU4yT7r", "Op9iU4yT7r"),
    ("Veritabanı şifresi: Kj6hG3fD8s", "Kj6hG3fD8s"),
    ("本番DBのパスワードは『Wq7eR2tY5u』です", "Wq7eR2tY5u"),
    ("数据库密码是 Zx3cV6bN9m", "Zx3cV6bN9m"),
    ("서버 암호: Lp8oK5iJ2u", "Lp8oK5iJ2u"),
    ("PULUMI_ACCESS_TOKEN=pul-" + "3f" * 20, "pul-" + "3f" * 20),
    ("agent token bkua_" + "Ab3Cd4Ef5Gh6Ij7Kl8Mn9", "bkua_Ab3Cd4Ef5Gh6Ij7Kl8Mn9"),
    ("Authorization header carries ya29.A0ARrdaM-" + "x7Yq2Lm9Pw3Kd8Vn4Rt6", "ya29.A0ARrdaM-x7Yq2Lm9Pw3Kd8Vn4Rt6"),
]


@pytest.mark.parametrize("text, secret", SECRETS, ids=[t[:32] for t, _ in SECRETS])
def test_a_secret_of_these_families_is_redacted(text, secret):
    assert secret not in risk.redact(text)


CERT_BODY = "\n".join(
    [
        "MIIC+zCCAeOgAwIBAgIJAKx7Qz9Lm2PwMA0GCSqGSIb3DQEBCwUAMBQxEjAQBgNV",
        "BAMMCWxvY2FsaG9zdDAeFw0yNDAxMDExMjAwMDBaFw0zNDAxMDExMjAwMDBaMBQx",
        "Ej4QBgNVBAMMCWxvY2FsaG9zdDCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoC",
    ]
)
BENIGN = [
    f"-----BEGIN CERTIFICATE-----\n{CERT_BODY}\n-----END CERTIFICATE-----",
    f"-----BEGIN PUBLIC KEY-----\n{CERT_BODY}\n-----END PUBLIC KEY-----",
    "client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUN6akNDQWJhZ0F3SUJBZ0lJUjRxN3Z4",
    "The host key fingerprint is SHA256:q9Lr3Vx7Kp2Wm8Zt4Yn6Bd1Hf5Jc0Gs3Ae7Ui2Ox9Pl.",
    "ERROR trace_id=5f0c2a9e-7b1d-4c3e-9a8f-2d6b1e0c4a7f key lookup failed",
    "event-id: 9c1d7e2a4b6f8031e5d7c9a2b4f6e8d0 while rotating the api key",
    'tok = AutoTokenizer.from_pretrained("intfloat/multilingual-e5-L6-v2")',
    "DATABASE_URL=mysql://${MYSQL_USER}:${MYSQL_PASSWORD}@db:3306/shop",
    "redis://:%REDIS_PASSWORD%@cache:6379/0 in the sample .env",
    "Replica: postgresql://report:*****@replica.internal:5432/analytics",
    "Put your key in .env: ANTHROPIC_API_KEY=sk-ant-...",
    "# template\nGITHUB_TOKEN=\nSENTRY_DSN=\nDJANGO_SECRET_KEY=",
    "$ psql -U admin -W\nPassword:\nWelcome back, connection opened.",
]


@pytest.mark.parametrize("text", BENIGN, ids=[t[:32] for t in BENIGN])
def test_public_referenced_or_empty_values_are_left_alone(text):
    assert risk.redact(text) == text


def test_a_private_key_beside_a_certificate_is_still_redacted():
    key_body = "MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC7Vq2Lm9Pw3Kd8Vn4"
    text = (
        f"-----BEGIN CERTIFICATE-----\n{CERT_BODY}\n-----END CERTIFICATE-----\n"
        f"-----BEGIN PRIVATE KEY-----\n{key_body}\n-----END PRIVATE KEY-----"
    )
    out = risk.redact(text)
    assert key_body not in out and CERT_BODY in out


@pytest.mark.parametrize(
    "text",
    [
        "パスワードは変更済みです。",  # "the password has been changed": no value
        "密码已经重置，请查看邮件。",
        "비밀번호는 관리자에게 문의하세요.",
        "Reset the password to the default via the admin page.",
    ],
)
def test_a_note_about_a_password_without_one_is_left_alone(text):
    assert risk.redact(text) == text
