#!/usr/bin/env bash
# Build Sourcebook.app for macOS with PyInstaller, from the same recipe as Linux
# (packaging/sourcebook.spec), and pack it in a disk image. NOT TRIED: written on Linux, for a
# maintainer with a Mac (see README, "Installing the app").
#
# Set-up, once, in the checkout (Python 3.11 from python.org or Homebrew; Xcode command line
# tools for llama-cpp-python, which builds with Metal by default on Apple silicon):
#   python3.11 -m venv .venv
#   .venv/bin/pip install -e '.[package,starter]' pillow    # pillow: PNG -> .icns icon
# Then:
#   packaging/build-macos.sh [--starter starter|starter-fast|none]
# Output: build/package/dist/Sourcebook.app and dist/Sourcebook-VERSION-macos-ARCH.dmg.
# The app is ad-hoc signed only (PyInstaller does that): Gatekeeper asks the user to confirm
# the first start (right-click, Open). Signing with a Developer ID and notarizing
# (`codesign --deep --options runtime`, `xcrun notarytool submit`) are left to the maintainer.
# llama.cpp's CPU variants (models/cpu_backend.py) are an x86-64 build option: a Mac build has
# none, and the probe tests the one library it has.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
STARTER=${SOURCEBOOK_PACKAGE_STARTER:-starter}
case "${1:-}" in
  --starter) STARTER=$2 ;;
  "") ;;
  *) echo "usage: $0 [--starter starter|starter-fast|none]" >&2; exit 2 ;;
esac
BUILD=$REPO/build/package
MODELS=$BUILD/bundled-models
mkdir -p "$MODELS" "$REPO/dist"
rm -f "$MODELS"/*.onnx

# The int8 ONNX embedder, exported here with torch, so the app never needs torch.
HF_HUB_OFFLINE=1 "$PYTHON" - "$MODELS" <<'PY'
import shutil
import sys
from pathlib import Path

from core.settings import models_cache_dir
from models.embedder import OnnxEmbedder

path = OnnxEmbedder(models_cache_dir(), quantized=True, prebuilt_dirs=[]).prepare()
shutil.copy2(path, Path(sys.argv[1]) / path.name)
PY

SOURCEBOOK_REPO=$REPO SOURCEBOOK_BUNDLED_MODELS=$MODELS SOURCEBOOK_PACKAGE_STARTER=$STARTER \
  "$PYTHON" -m PyInstaller --noconfirm --log-level WARN \
  --distpath "$BUILD/dist" --workpath "$BUILD/work" packaging/sourcebook.spec

VERSION=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("sourcebook"))')
DMG=$REPO/dist/Sourcebook-$VERSION-macos-$(uname -m).dmg
rm -f "$DMG"
# A disk image holding the app and a link to /Applications: the usual drag-to-install window.
STAGE=$BUILD/dmg
rm -rf "$STAGE" && mkdir -p "$STAGE"
cp -R "$BUILD/dist/Sourcebook.app" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
hdiutil create -volname Sourcebook -srcfolder "$STAGE" -ov -format UDZO "$DMG"
echo "$DMG"
