# Build Sourcebook for Windows with PyInstaller, from the same recipe as Linux
# (packaging/sourcebook.spec): a folder with Sourcebook's sourcebook.exe, zipped. NOT TRIED:
# written on Linux, for a maintainer with a Windows machine (see README, "Installing the app").
#
# Set-up, once, in the checkout (Python 3.11 from python.org; Visual Studio Build Tools with
# the C++ workload and CMake for llama-cpp-python, which builds from source):
#   py -3.11 -m venv .venv
#   .venv\Scripts\pip install -e ".[package,starter]" pillow   # pillow: PNG -> .ico icon
# Then, in PowerShell:
#   powershell -ExecutionPolicy Bypass -File packaging\build-windows.ps1 [-Starter none]
# Output: build\package\dist\sourcebook\ and dist\sourcebook-VERSION-windows-x64.zip.
# The folder holds install-shortcut.ps1, which adds a Start menu entry for the current user.
# The app is unsigned: SmartScreen asks the user to confirm the first start; signing
# (signtool with a code-signing certificate) is left to the maintainer. On Windows, llama.cpp's
# CPU variants are .dll files; models/cpu_backend.py looks for them in llama_cpp\lib too.
param([ValidateSet("starter", "starter-fast", "none")][string]$Starter = "starter")
$ErrorActionPreference = "Stop"

$Repo = (Resolve-Path "$PSScriptRoot\..").Path
Set-Location $Repo
$Python = if ($env:PYTHON) { $env:PYTHON } else { "$Repo\.venv\Scripts\python.exe" }
$Build = "$Repo\build\package"
$Models = "$Build\bundled-models"
New-Item -ItemType Directory -Force -Path $Models, "$Repo\dist" | Out-Null
Remove-Item "$Models\*.onnx" -ErrorAction SilentlyContinue

# The int8 ONNX embedder, exported here with torch, so the app never needs torch.
$env:HF_HUB_OFFLINE = "1"
$export = @"
import shutil, sys
from pathlib import Path
from core.settings import models_cache_dir
from models.embedder import OnnxEmbedder
path = OnnxEmbedder(models_cache_dir(), quantized=True, prebuilt_dirs=[]).prepare()
shutil.copy2(path, Path(sys.argv[1]) / path.name)
"@
$export | & $Python - $Models
if ($LASTEXITCODE -ne 0) { throw "exporting the ONNX embedder failed" }

$env:SOURCEBOOK_REPO = $Repo
$env:SOURCEBOOK_BUNDLED_MODELS = $Models
$env:SOURCEBOOK_PACKAGE_STARTER = $Starter
& $Python -m PyInstaller --noconfirm --log-level WARN --distpath "$Build\dist" `
  --workpath "$Build\work" packaging\sourcebook.spec
if ($LASTEXITCODE -ne 0) { throw "PyInstaller failed" }

$App = "$Build\dist\sourcebook"
Copy-Item packaging\install-shortcut.ps1, packaging\sourcebook.png $App
$Version = & $Python -c "import importlib.metadata as m; print(m.version('sourcebook'))"
$Zip = "$Repo\dist\sourcebook-$Version-windows-x64.zip"
if (Test-Path $Zip) { Remove-Item $Zip }
Compress-Archive -Path $App -DestinationPath $Zip
Write-Output $Zip
