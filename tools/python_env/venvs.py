"""Virtual environments for tools that need heavy Python packages (a Triton server wheel, Ray):
each made once under ~/.cache/peregrine by the script that needs it, seeing the project's
pinned numpy / onnx through the system site packages, never installing into the project's own
interpreter.
"""
import os
import pathlib
import subprocess
import sys

CACHE = pathlib.Path.home() / ".cache" / "peregrine"


def ensure_venv(name, packages, no_deps=()):
    """The venv CACHE/name holding `packages` (pinned specs; those in `no_deps` installed without
    their dependencies), made or remade when its recorded package list differs; its python."""
    venv = CACHE / name
    python = venv / "bin" / "python"
    marker = venv / "peregrine-packages.txt"
    want = "\n".join(list(no_deps) + list(packages))
    if python.exists() and marker.exists() and marker.read_text() == want:
        return python
    print(f"{name}: installing {' '.join(list(no_deps) + list(packages))} into {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--system-site-packages", str(venv)],
                   check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = ([pip + ["--no-deps"] + list(no_deps)] if no_deps else []) + \
        ([pip + list(packages)] if packages else [])
    for cmd in steps:
        # pip reports the unmet (and unneeded) dependencies of --no-deps wheels on stderr.
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            raise SystemExit(f"error: pip install {' '.join(cmd[len(pip):])} failed")
    marker.write_text(want)
    return python


def reexec_in_venv(name, packages, no_deps=()):
    """Runs the calling script again inside the venv unless it already runs there."""
    venv = CACHE / name
    if pathlib.Path(sys.prefix).resolve() == venv.resolve():
        return
    python = ensure_venv(name, packages, no_deps)
    os.execv(str(python), [str(python)] + sys.argv)
