#!/bin/sh
# The browser tests (tests/browser) drive Debian's Chromium through Playwright (Playwright's own browser download
# is not used: it needs a CDN the tests must not depend on). Installs the distribution's package when it is
# missing and this user can (root with apt-get); otherwise says how, and the browser tests skip with that reason.
# Never fails the caller: a machine that refuses the install still runs the rest of the suite.
CHROMIUM="${1:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] && exit 0
how="sudo apt-get install -y chromium (Debian/Ubuntu), or point ANAPHORA_TEST_CHROMIUM at a Chromium binary"
if [ "$CHROMIUM" != /usr/bin/chromium ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test: no Chromium at $CHROMIUM, so the browser tests will be skipped; to run them: $how" >&2
  exit 0
fi
echo "install-test: installing Debian's chromium for the browser tests (no Chromium at $CHROMIUM)" >&2
if apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; then
  exit 0
fi
echo "install-test: apt-get could not install chromium, so the browser tests will be skipped; to run them: $how" >&2
exit 0
