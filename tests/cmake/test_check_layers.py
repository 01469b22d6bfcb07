#!/usr/bin/env python3
"""scripts/check_layers.py on the real tree (every include follows the layers) and on a small
made-up tree where it must refuse a back-edge, an include beside its layer and a cycle.

  python3 tests/cmake/test_check_layers.py [BUILD_DIR]
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check_layers.py")


def check(layers_txt, root):
    return subprocess.run([sys.executable, CHECK, layers_txt, root], capture_output=True, text=True)


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    real = check(os.path.join(build, "layers.txt"), ROOT)
    assert real.returncode == 0, real.stderr
    print("ok   every include of src/ and include/ follows the layers")

    with tempfile.TemporaryDirectory() as tmp:
        table = os.path.join(tmp, "layers.txt")
        with open(table, "w") as f:
            f.write("core | src/core | \nops | src/ops | core\npasses | src/passes | ops\n"
                    "lab | src/lab | core\n")
        write(tmp, "src/core/a.h", "#pragma once\n")
        write(tmp, "src/ops/b.h", '#include "core/a.h"\n')
        write(tmp, "src/passes/c.cc", '#include "ops/b.h"\n#include "core/a.h"\n')
        write(tmp, "src/lab/d.cc", '#include "core/a.h"\n#include <vector>\n')
        ok = check(table, tmp)
        assert ok.returncode == 0, ok.stderr
        # A back-edge: a lower layer including a higher one.
        write(tmp, "src/ops/e.cc", '#include "passes/c.h"\n')
        write(tmp, "src/passes/c.h", "#pragma once\n")
        back = check(table, tmp)
        assert back.returncode == 1, back.stderr
        assert "src/ops/e.cc:1: layer 'ops' includes \"passes/c.h\" of layer 'passes'" in back.stderr
        os.remove(os.path.join(tmp, "src/ops/e.cc"))
        # Beside: lab is not below passes.
        write(tmp, "src/passes/f.cc", '#include "lab/g.h"\n')
        write(tmp, "src/lab/g.h", "#pragma once\n")
        beside = check(table, tmp)
        assert beside.returncode == 1 and "layer 'lab'" in beside.stderr, beside.stderr
        os.remove(os.path.join(tmp, "src/passes/f.cc"))
        # A file no layer owns, and a cycle in the table.
        write(tmp, "src/stray/h.cc", "")
        stray = check(table, tmp)
        assert stray.returncode == 1 and "belongs to no layer" in stray.stderr, stray.stderr
        with open(table, "a") as f:
            f.write("core2 | src/stray | core3\ncore3 | src/x | core2\n")
        cycle = check(table, tmp)
        assert cycle.returncode != 0 and "cycle" in cycle.stderr, cycle.stderr
    print("ok   a back-edge, an include beside its layer, a stray file and a cycle are refused")


if __name__ == "__main__":
    main()
