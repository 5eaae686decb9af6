#!/usr/bin/env bash
# Build the Sourcebook app for Linux: one folder made by PyInstaller, packed in a tarball a user
# unpacks and runs (`./sourcebook/sourcebook`; `./sourcebook/install-desktop-entry` adds it to
# the desktop's launcher). `make package` runs this with the project's .venv.
#
#   packaging/build-linux.sh [--starter starter|starter-fast|none]
#
# Environment: PYTHON (default .venv/bin/python; it must have the `package` extra, i.e.
# PyInstaller, and torch for the one-time ONNX export), SOURCEBOOK_PACKAGE_STARTER (as
# --starter; default "starter": the 1.5B model's parts, ~1.1 GB), GZIP_LEVEL (default 6).
# Outputs: build/package/ (PyInstaller's work and the folder) and
# dist/sourcebook-VERSION-linux-ARCH[-STARTER].tar.gz; prints the tarball's path last.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
STARTER=${SOURCEBOOK_PACKAGE_STARTER:-starter}
while [ $# -gt 0 ]; do
  case "$1" in
    --starter) STARTER=$2; shift 2 ;;
    --starter=*) STARTER=${1#--starter=}; shift ;;
    *) echo "build-linux: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$STARTER" in
  starter|starter-fast|none) ;;
  *) echo "build-linux: --starter must be starter, starter-fast or none" >&2; exit 2 ;;
esac

say() { printf 'build-linux: %s\n' "$*"; }
BUILD=$REPO/build/package
MODELS=$BUILD/bundled-models
mkdir -p "$BUILD" "$MODELS" "$REPO/dist"
started=$(date +%s)

say "exporting the int8 ONNX embedder (torch runs here, at build time, never in the app)"
rm -f "$MODELS"/*.onnx
# The models cache is the app's own (a versioned file name): a file the tests or the app
# exported already is reused.
HF_HUB_OFFLINE=1 "$PYTHON" - "$MODELS" <<'PY'
import shutil
import sys
from pathlib import Path

from core.settings import models_cache_dir
from models.embedder import OnnxEmbedder

out = Path(sys.argv[1])
path = OnnxEmbedder(models_cache_dir(), quantized=True, prebuilt_dirs=[]).prepare()
shutil.copy2(path, out / path.name)
print(f"build-linux: shipping {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
PY

if [ "$STARTER" != none ]; then
  say "checking the $STARTER model's part packages (the app assembles them on first use)"
  "$PYTHON" - "$STARTER" <<'PY'
import sys

from models.starter import STARTERS, locate_parts

spec = next(s for s in STARTERS if s.extra == sys.argv[1])
parts = locate_parts(spec)  # raises, naming the missing package and how to install it
print(f"build-linux: shipping {spec.name} in {len(parts)} parts")
PY
fi

say "running PyInstaller (one folder)"
SOURCEBOOK_REPO=$REPO SOURCEBOOK_BUNDLED_MODELS=$MODELS SOURCEBOOK_PACKAGE_STARTER=$STARTER \
  "$PYTHON" -m PyInstaller --noconfirm --log-level WARN \
  --distpath "$BUILD/dist" --workpath "$BUILD/work" packaging/sourcebook.spec

APP=$BUILD/dist/sourcebook
install -m 0755 packaging/install-desktop-entry "$APP/install-desktop-entry"
install -m 0644 packaging/sourcebook.desktop packaging/sourcebook.svg packaging/sourcebook.png \
  "$APP/"
VERSION=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("sourcebook"))')
ARCH=$(uname -m)
cat > "$APP/README.txt" <<EOF
Sourcebook $VERSION for Linux ($ARCH)

Run it:                   ./sourcebook          (the app; with a command, the CLI:
                                                  ./sourcebook search "words", ./sourcebook --help)
Add it to your launcher:  ./install-desktop-entry   (./install-desktop-entry --uninstall removes it)

Everything runs on this machine. Your library and settings live in ~/.local/share/sourcebook,
models are assembled into ~/.cache/sourcebook/models on first use.
EOF

SUFFIX=""
[ "$STARTER" = starter ] || SUFFIX="-$STARTER"
TARBALL=$REPO/dist/sourcebook-$VERSION-linux-$ARCH$SUFFIX.tar.gz
say "packing $(du -sh "$APP" | cut -f1) into $TARBALL"
tar -C "$BUILD/dist" -cf - sourcebook | gzip "-${GZIP_LEVEL:-6}" > "$TARBALL.tmp"
mv "$TARBALL.tmp" "$TARBALL"
say "done in $(( $(date +%s) - started )) s: $(du -h "$TARBALL" | cut -f1)"
echo "$TARBALL"
