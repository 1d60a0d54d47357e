#!/usr/bin/env bash
# Runs once when the compose postgres volume is first created: the owner and application roles (see README).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE dreamweb_owner LOGIN CREATEDB PASSWORD '${DREAMWEB_OWNER_PASSWORD}';
CREATE ROLE dreamweb_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD '${DREAMWEB_APP_PASSWORD}';
CREATE DATABASE dreamweb OWNER dreamweb_owner;
SQL
