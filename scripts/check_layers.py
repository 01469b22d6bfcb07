#!/usr/bin/env python3
"""Every #include in the library follows the layers: a file may include headers of its own
layer and of the layers below it (those its layer depends on, directly or through others),
never of a layer above or beside it.

    scripts/check_layers.py BUILD/layers.txt SOURCE_DIR

layers.txt is written by CMakeLists.txt (peregrine_layer): one line per layer,
`name | dirs-or-files | deps`. Exits 1 naming each offending include and the rule it breaks.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(path):
    layers = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            name, dirs, deps = (part.strip() for part in line.split("|"))
            layers[name] = (dirs.replace(";", " ").split(), deps.replace(";", " ").split())
    return layers


def below(layers):
    """Each layer's transitive dependencies."""
    closure = {}

    def visit(name, stack):
        if name in closure:
            return closure[name]
        if name in stack:
            raise SystemExit(f"check_layers: the layers depend on each other in a cycle: "
                             f"{' -> '.join(stack + [name])}")
        result = set()
        for dep in layers[name][1]:
            if dep not in layers:
                raise SystemExit(f"check_layers: layer {name} depends on unknown layer {dep}")
            result |= {dep} | visit(dep, stack + [name])
        closure[name] = result
        return result

    for name in layers:
        visit(name, [])
    return closure


def owner(path, prefixes):
    """The layer of a path relative to the source dir: its longest matching prefix."""
    best = None
    for prefix, name in prefixes:
        if (path == prefix or path.startswith(prefix + "/")) and (
                best is None or len(prefix) > len(best[0])):
            best = (prefix, name)
    return best[1] if best else None


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    layers = read_layers(sys.argv[1])
    root = sys.argv[2]
    allowed = below(layers)
    prefixes = [(d.rstrip("/"), name) for name, (dirs, _) in layers.items() for d in dirs]
    errors = []
    for top in ("src", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                layer = owner(path, prefixes)
                if layer is None:
                    errors.append(f"{path}: belongs to no layer (add its folder to a "
                                  "peregrine_layer in CMakeLists.txt)")
                    continue
                with open(os.path.join(root, path), errors="replace") as src:
                    for number, line in enumerate(src, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        target = None
                        for base in ("src", "include"):
                            if os.path.exists(os.path.join(root, base, header)):
                                target = owner(os.path.join(base, header), prefixes)
                                break
                        if target is None or target == layer or target in allowed[layer]:
                            continue
                        errors.append(f"{path}:{number}: layer '{layer}' includes \"{header}\" "
                                      f"of layer '{target}', which is not below it (below "
                                      f"'{layer}': {', '.join(sorted(allowed[layer])) or 'none'})")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
