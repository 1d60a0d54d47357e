#!/bin/sh
# Smoke test after a release.
set -eu
curl -fsS "${1:-https://app.example.test}/healthz"
echo ok
