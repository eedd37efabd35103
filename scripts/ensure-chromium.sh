#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the browser tests (chromedp drives it headless).
# Idempotent: does nothing when /usr/bin/chromium (or TURNSTILE_CHROMIUM) already runs.
set -euo pipefail

bin="${TURNSTILE_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $bin is missing and apt-get is not available; install Chromium and set TURNSTILE_CHROMIUM" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  sudo="sudo"
fi
echo "ensure-chromium: installing Debian's chromium"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
"$bin" --version
