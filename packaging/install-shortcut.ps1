# Add Sourcebook to the Start menu of the current user: a shortcut to sourcebookw.exe (the app
# without a console window) beside this
# script (Windows' counterpart of install-desktop-entry). -Uninstall removes it. NOT TRIED.
param([switch]$Uninstall)
$ErrorActionPreference = "Stop"
$Programs = [Environment]::GetFolderPath("Programs")
$Link = Join-Path $Programs "Sourcebook.lnk"
if ($Uninstall) {
  Remove-Item $Link -ErrorAction SilentlyContinue
  Write-Output "Removed $Link"
  exit 0
}
$Exe = Join-Path $PSScriptRoot "sourcebookw.exe"
if (-not (Test-Path $Exe)) { throw "no sourcebookw.exe beside this script ($PSScriptRoot)" }
$Shell = New-Object -ComObject WScript.Shell
$Shortcut = $Shell.CreateShortcut($Link)
$Shortcut.TargetPath = $Exe
$Shortcut.WorkingDirectory = $PSScriptRoot
$Shortcut.IconLocation = "$Exe,0"
$Shortcut.Description = "Offline research assistant"
$Shortcut.Save()
Write-Output "Installed $Link -> $Exe"
