#!/usr/bin/env bash
# Test a built Sourcebook tarball as a user would: unpack it into an empty folder and run its
# binary under a virtual X display (Xvfb) with a fresh HOME and nothing of the build machine's
# Python on the path (env -i: no .venv, no source tree, no PYTHONPATH; another working folder).
#
#   packaging/test-bundle.sh TARBALL [--gguf MODEL.gguf] [--keep]
#
# 1. the app's self-test in the real window (desktop/self_test.py): leave the welcome screen,
#    add a PDF, search, open the first hit in the evidence viewer (the page rendered with the
#    words highlighted), save a screenshot, close the window;
# 2. the bundled command line on the same home: `docs` lists the PDF, `search` finds it; the
#    launcher entry installs into the fresh HOME, pointing at the unpacked binary;
# 3. with --gguf: `models --probe`, the llama.cpp probe, whose child processes run through the
#    bundle's own binary (a frozen app has no `python -m`);
# The bundle must hold no torch (checked first): any import of it would fail the steps above.
# Exit 0 when all passed; otherwise non-zero, with the app's log printed. Needs Xvfb
# (packaging/system-deps.sh installs it). `make package-test` builds a tarball and runs this.
set -euo pipefail

say() { printf 'test-bundle: %s\n' "$*"; }
fail() { say "FAILED: $*"; exit 1; }

TARBALL=""
GGUF=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --gguf) GGUF=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -*) echo "usage: $0 TARBALL [--gguf MODEL.gguf] [--keep]" >&2; exit 2 ;;
    *) TARBALL=$1; shift ;;
  esac
done
[ -n "$TARBALL" ] && [ -f "$TARBALL" ] || { echo "usage: $0 TARBALL [--gguf F] [--keep]" >&2; exit 2; }
TARBALL=$(cd "$(dirname "$TARBALL")" && pwd)/$(basename "$TARBALL")
command -v Xvfb >/dev/null || fail "Xvfb is not installed (run packaging/system-deps.sh)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sourcebook-bundle-test.XXXXXX")
XVFB_PID=""
cleanup() {
  if [ -n "$XVFB_PID" ]; then kill "$XVFB_PID" 2>/dev/null || true; fi
  if [ "$KEEP" = 1 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
started=$(date +%s)

mkdir -p "$WORK/app" "$WORK/home" "$WORK/docs" "$WORK/elsewhere"
tar -C "$WORK/app" -xzf "$TARBALL"
APP=$WORK/app/sourcebook
[ -x "$APP/sourcebook" ] || fail "the tarball has no sourcebook/sourcebook binary"
say "unpacked $(du -sh "$APP" | cut -f1) in $(( $(date +%s) - started )) s"
if find "$APP" -maxdepth 3 \( -name torch -o -name 'libtorch*' \) | grep -q .; then
  fail "the bundle holds torch"
fi
# A PDF from outside the app folder, as a user's would be (the NTSB sample report).
cp "$APP/_internal/resources/samples/20080102X00005.pdf" "$WORK/docs/accident report.pdf"

# A free display number, chosen by Xvfb itself.
exec 3> "$WORK/display"
Xvfb -displayfd 3 -screen 0 1440x900x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
XVFB_PID=$!
exec 3>&-
for _ in $(seq 50); do [ -s "$WORK/display" ] && break; sleep 0.1; done
[ -s "$WORK/display" ] || fail "Xvfb did not start: $(cat "$WORK/xvfb.log")"
DISPLAY_NUM=:$(head -1 "$WORK/display")

# The user's environment: a fresh HOME, the system's PATH only, no Python variables.
run() {
  (cd "$WORK/elsewhere" && env -i HOME="$WORK/home" PATH=/usr/bin:/bin LANG=C.UTF-8 \
    DISPLAY="$DISPLAY_NUM" XDG_RUNTIME_DIR="$WORK/home/.run" "$@")
}
mkdir -p -m 0700 "$WORK/home/.run"
LOG=$WORK/home/.local/share/sourcebook/logs/sourcebook.log
show_log() { [ -f "$LOG" ] && { say "the app's log:"; tail -n 60 "$LOG"; } || true; }

say "1. the app's self-test in the real window on $DISPLAY_NUM"
t0=$(date +%s%N)
if ! run timeout 600 "$APP/sourcebook" --self-test "$WORK/docs/accident report.pdf" \
    --query "ground loop during landing" --screenshot "$WORK/screenshot.png"; then
  show_log
  fail "the self-test failed"
fi
say "   passed in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
[ "$(stat -c %s "$WORK/screenshot.png" 2>/dev/null || echo 0)" -gt 10000 ] \
  || fail "no screenshot was saved"
if [ -n "${SOURCEBOOK_BUNDLE_SCREENSHOT:-}" ]; then cp "$WORK/screenshot.png" "$SOURCEBOOK_BUNDLE_SCREENSHOT"; fi

say "2. the command line on the same library"
docs=$(run "$APP/sourcebook" docs) || { show_log; fail "sourcebook docs failed"; }
# one document, ready (its title is the PDF's own: "... Aviation Accident Final Report")
[ "$(grep -c '^doc_.* ready .*Accident' <<<"$docs")" = 1 ] \
  || fail "sourcebook docs does not list the PDF as ready: $docs"
hits=$(run "$APP/sourcebook" search "probable cause of the accident" -k 3) \
  || { show_log; fail "sourcebook search failed"; }
grep -q "ev1:" <<<"$hits" || fail "sourcebook search found nothing: $hits"

say "   the launcher entry (install-desktop-entry)"
run "$APP/install-desktop-entry" >/dev/null || fail "install-desktop-entry failed"
ENTRY=$WORK/home/.local/share/applications/sourcebook.desktop
grep -qxF "Exec=\"$APP/sourcebook\"" "$ENTRY" || fail "the launcher entry does not start $APP/sourcebook"
icon=$(sed -n 's/^Icon=//p' "$ENTRY")
[ -s "$icon" ] || fail "the launcher entry's icon $icon is missing"
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$ENTRY"; fi

if [ -n "$GGUF" ]; then
  say "3. the llama.cpp probe through the bundle's binary ($(basename "$GGUF"))"
  mkdir -p "$WORK/models"
  ln -s "$(cd "$(dirname "$GGUF")" && pwd)/$(basename "$GGUF")" "$WORK/models/"
  probe=$(run "$APP/sourcebook" models --probe --path "$WORK/models" 2>&1) \
    || { say "$probe"; fail "sourcebook models --probe failed"; }
  grep -q "works on this CPU" <<<"$probe" || { say "$probe"; fail "the probe did not pass"; }
  say "   $(grep "Local runtime" <<<"$probe")"
else
  say "3. (no --gguf: the llama.cpp probe is not run)"
fi

say "passed in $(( $(date +%s) - started )) s"
