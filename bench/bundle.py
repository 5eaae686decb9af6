"""The packaged app against the source install: size, start-up time and idle memory.

"Before" is the app as `make run` starts it (``.venv/bin/sourcebook``), "after" the PyInstaller
bundle (a tarball from ``make package`` or ``make package-test``, unpacked into a temporary
folder). For each, on a virtual X display (Xvfb) with a fresh HOME per start (so every start
is a first start: the welcome screen, an empty library) and the app's own ``--ready-file``
hook:

- size: the tarball and the unpacked folder; for the source install, ``.venv`` (what a user
  installs besides the checkout);
- cold start: seconds from starting the process to a usable window (shown, the library listed),
  median of ``--runs`` starts (the first start of each is also reported; the OS page cache is not
  dropped, so starts after the first read the files from memory);
- idle RSS: the process's resident memory ``--idle`` seconds after the window became usable
  (and whether torch is mapped into it, from ``/proc/PID/maps``).

    python3 bench/bundle.py --tarball dist/sourcebook-0.1.0-linux-x86_64-none.tar.gz
    python3 bench/bundle.py --runs 5 --idle 10

Saves ``bench/results/bundle.json``. Uses only the standard library (it runs the apps, it does
not import them). The figures depend on how busy the machine is; the JSON records the load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "bundle.json"


def say(text: str) -> None:
    print(f"bundle: {text}", flush=True)


def du(path: Path) -> int:
    """Bytes on disk under ``path`` (symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = Path(root) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1440x900x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        raise SystemExit("bundle: Xvfb did not start (packaging/system-deps.sh installs it)")
    return proc, f":{number}"


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def maps_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def one_start(command: list[str], display: str, work: Path, idle_s: float) -> dict[str, object]:
    """Start the app once on a fresh home; time to the ready file, then the idle RSS."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    ready = home / "ready"
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "DISPLAY": display,
        "XDG_RUNTIME_DIR": str(home),
        "HF_HUB_OFFLINE": "1",
    }
    started = time.monotonic()
    proc = subprocess.Popen(
        [*command, "--ready-file", str(ready)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while not ready.exists():
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"bundle: {command[0]} exited with {proc.returncode}: {err}")
            if time.monotonic() - started > 300:
                raise SystemExit(f"bundle: {command[0]} was not ready within 300 s")
            time.sleep(0.02)
        to_window = time.monotonic() - started
        in_app = float(ready.read_text().split()[0])
        time.sleep(idle_s)
        rss = rss_bytes(proc.pid)
        torch = maps_torch(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)
    return {
        "start_s": round(to_window, 3),
        "in_app_s": round(in_app, 3),
        "rss": rss,
        "torch": torch,
    }


def measure(
    commands: dict[str, list[str]], display: str, work: Path, runs: int, idle: float
) -> dict[str, dict[str, object]]:
    """``runs`` starts of each command, taking turns (so a change in the machine's load while
    measuring falls on both alike)."""
    starts: dict[str, list[dict[str, object]]] = {label: [] for label in commands}
    for i in range(runs):
        for label, command in commands.items():
            r = one_start(command, display, work, idle)
            say(
                f"{label} start {i + 1}: usable window in {r['start_s']:.2f} s, idle RSS "
                f"{int(r['rss']) / 2**20:.0f} MiB{', torch mapped' if r['torch'] else ''}"
            )
            starts[label].append(r)
    return {
        label: {
            "command": " ".join(_shown(c) for c in commands[label]),
            "first_start_s": rs[0]["start_s"],
            "median_start_s": statistics.median(float(r["start_s"]) for r in rs),
            "median_idle_rss_mib": round(statistics.median(int(r["rss"]) for r in rs) / 2**20, 1),
            "torch_mapped": any(r["torch"] for r in rs),
            "starts": rs,
        }
        for label, rs in starts.items()
    }


def _shown(arg: str) -> str:
    """A command's word as a result file keeps it: no absolute path (results are shared)."""
    path = Path(arg)
    if not path.is_absolute():
        return arg
    if path.is_relative_to(REPO):
        return str(path.relative_to(REPO))
    if "app" in path.parts:  # the unpacked tarball, in a temporary folder
        return "(unpacked) " + "/".join(path.parts[path.parts.index("app") + 1 :])
    return path.name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tarball", type=Path, help="default: the newest dist/sourcebook-*.tar.gz")
    p.add_argument("--venv", type=Path, default=REPO / ".venv")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--idle", type=float, default=5.0, help="seconds idle before reading RSS")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    tarball = args.tarball or max(
        (REPO / "dist").glob("sourcebook-*.tar.gz"), key=lambda f: f.stat().st_mtime, default=None
    )
    if tarball is None or not tarball.is_file():
        raise SystemExit("bundle: no tarball; run `make package-test` (or `make package`) first")
    xvfb, display = start_xvfb()
    work = Path(tempfile.mkdtemp(prefix="sourcebook-bundle-bench-"))
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(work / "app", filter="tar")
        binary = work / "app" / "sourcebook" / "sourcebook"
        load = os.getloadavg()
        measured = measure(
            {"venv": [str(args.venv / "bin" / "sourcebook")], "bundle": [str(binary)]},
            display,
            work,
            args.runs,
            args.idle,
        )
        result = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_1_5_15_before": [round(x, 2) for x in load],
                "loadavg_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
                "note": "the two apps start in turns, so a change of load falls on both; "
                "compare them within one run, and trust a run whose load stayed low",
            },
            "runs": args.runs,
            "idle_s": args.idle,
            "before": {
                "what": "source install: .venv/bin/sourcebook",
                "venv_bytes": du(args.venv),
                **measured["venv"],
            },
            "after": {
                "what": f"PyInstaller one-folder bundle: {tarball.name}",
                "tarball_bytes": tarball.stat().st_size,
                "unpacked_bytes": du(work / "app"),
                **measured["bundle"],
            },
        }
    finally:
        xvfb.terminate()
        xvfb.wait()
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    b, a = result["before"], result["after"]
    say(
        f"before: .venv {b['venv_bytes'] / 1e9:.2f} GB, usable window in "
        f"{b['median_start_s']:.2f} s (median), idle RSS {b['median_idle_rss_mib']:.0f} MiB"
    )
    say(
        f"after:  tarball {a['tarball_bytes'] / 1e6:.0f} MB, unpacked "
        f"{a['unpacked_bytes'] / 1e6:.0f} MB, usable window in "
        f"{a['median_start_s']:.2f} s (median), idle RSS {a['median_idle_rss_mib']:.0f} MiB"
    )
    say(f"saved {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
