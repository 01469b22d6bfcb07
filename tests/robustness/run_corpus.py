"""Runs `peregrine run` on every malformed model of make_corpus.py and checks that
each fails cleanly: the expected exit code, an 'error:' line matching the rule it
broke, no crash and no hang."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import make_corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", required=True)
    args = ap.parse_args()
    failures = 0
    total = 0
    with tempfile.TemporaryDirectory() as root:
        for name, want_code, pattern, extra in make_corpus.cases(root):
            total += 1
            out_dir = os.path.join(root, "out_" + name.replace("/", "_"))
            cmd = [args.peregrine, "run", os.path.join(root, name, "model.onnx"), "--output-dir", out_dir] + extra
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                print(f"FAIL {name}: hung (no exit within 60 s)")
                failures += 1
                continue
            err = p.stderr.strip()
            problems = []
            if p.returncode < 0:
                problems.append(f"killed by signal {-p.returncode}")
            elif p.returncode != want_code:
                problems.append(f"exit code {p.returncode}, expected {want_code}")
            if not err.startswith("error:"):
                problems.append("stderr does not start with 'error:'")
            if not re.search(pattern, err):
                problems.append(f"message does not match /{pattern}/")
            if problems:
                failures += 1
                print(f"FAIL {name}: {'; '.join(problems)}\n     stderr: {err[:300]}")
            else:
                print(f"ok   {name}: {err[:150]}")
    print(f"malformed-model corpus: {total - failures} of {total} rejected as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
