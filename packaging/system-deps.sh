#!/usr/bin/env bash
# Install the Debian/Ubuntu packages Sourcebook needs, when they are missing.
#
#   tesseract-ocr, tesseract-ocr-eng   OCR of scanned PDF pages (PyMuPDF drives Tesseract)
#   xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0
#                                      a virtual X display for the desktop app's screenshots/tests
#
# Idempotent: installed packages are skipped and `apt-get update` runs only when something has to
# be installed. Needs root (or passwordless sudo) to install; otherwise it prints what is missing
# and how to install it, and exits 0 so `make` goes on (OCR then reports scanned pages instead).
# Usage: packaging/system-deps.sh [--check]   (--check: only report, never install)
set -u

PACKAGES=(
  tesseract-ocr
  tesseract-ocr-eng
  xvfb
  xauth
  libxcb-icccm4
  libxcb-keysyms1
  libxcb-cursor0
  libxkbcommon-x11-0
)

say() { printf 'system-deps: %s\n' "$*"; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  say "warning: not a Debian/Ubuntu system (no dpkg/apt-get); install these by hand if needed:"
  say "  ${PACKAGES[*]}"
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [ "$status" = "installed" ]; then
    say "ok       $pkg"
  else
    say "missing  $pkg"
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  say "all system packages present"
  exit 0
fi

if [ "${1:-}" = "--check" ]; then
  say "check only: not installing ${missing[*]}"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    say "warning: not root, cannot install: ${missing[*]}"
    say "  run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    say "  (without tesseract-ocr, scanned PDF pages are reported as having no text layer)"
    exit 0
  fi
fi

export DEBIAN_FRONTEND=noninteractive
say "running: apt-get update"
if ! "${SUDO[@]}" apt-get update -qq; then
  say "warning: apt-get update failed; trying the install with the current package lists"
fi
say "running: apt-get install -y --no-install-recommends ${missing[*]}"
if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  say "warning: apt-get install failed for: ${missing[*]}"
  exit 0
fi
say "installed: ${missing[*]}"
if command -v tesseract >/dev/null 2>&1; then
  say "$(tesseract --version 2>&1 | head -n 1)"
fi
exit 0
