#!/usr/bin/env python3
"""Files of one crate that depend on each other in a circle (a.rs names b.rs's items and
b.rs, directly or through others, names a.rs's): each circle is printed with the paths
that tie it, and the exit status is 1 when there is one.

A file's dependencies are the modules its `crate::…`, `super::…` and `self::…` paths name
(in `use` lines and in code), resolved to the deepest module that has a file of its own.
Test modules (`#[cfg(test)] mod …` to the end of the file) and comments are left out: tests
may reach anywhere. Run from the repository root, as .ci/run does.

Usage: scripts/check_file_circles.py [REPO]
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_]\w*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_]\w*)*)::\{([^{}]*)\}")
TESTS = re.compile(r"^\s*#\[cfg\(test\)\]\s*\n\s*(pub(\([^)]*\))?\s+)?mod\s+\w+", re.M)


def modules(src):
    """Module path (a tuple) -> its file, for every .rs file under `src`."""
    found = {}
    for folder, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            parts = os.path.relpath(os.path.join(folder, name), src)[:-3].split(os.sep)
            if parts[-1] in ("lib", "main", "mod"):
                parts = parts[:-1]
            found[tuple(parts)] = os.path.join(folder, name)
    return found


def text_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    tests = TESTS.search(text)
    if tests:
        text = text[: tests.start()]
    return re.sub(r"//[^\n]*", "", text)


def base_of(root, module):
    """The module a path starting at `root` is resolved from, written in `module`."""
    if root == "crate":
        return ()
    if root == "self":
        return module
    # `super` from a.rs is a's parent; from a/mod.rs it is also a's parent.
    return module[:-1] if module else ()


def deepest(path, files):
    for k in range(len(path), 0, -1):
        if path[:k] in files:
            return path[:k]
    return None


def edges(module, files):
    text = text_of(files[module])
    out = {}
    candidates = []
    for m in GROUP.finditer(text):
        root, rest, group = m.group(1), m.group(2), m.group(3)
        for item in group.split(","):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self":
                candidates.append((root, rest + "::" + item))
            elif item == "self":
                candidates.append((root, rest))
    for m in PATH.finditer(text):
        candidates.append((m.group(1), m.group(2)))
    for root, rest in candidates:
        names = [p for p in rest.split("::") if p]
        base = base_of(root, module)
        while names and names[0] == "super":
            base, names = base[:-1], names[1:]
        target = deepest(tuple(base) + tuple(names), files)
        if target is not None and target != module:
            out.setdefault(target, set()).add(root + rest)
    return out


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the components of two or more nodes."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(component)
    return result


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    circles = 0
    for crate in sorted(os.listdir(os.path.join(repo, "crates"))):
        src = os.path.join(repo, "crates", crate, "src")
        if not os.path.isdir(src):
            continue
        files = modules(src)
        graph, why = {}, {}
        for module in files:
            deps = edges(module, files)
            graph[module] = set(deps)
            for target, paths in deps.items():
                why[(module, target)] = paths
        for component in strongly_connected(graph):
            circles += 1
            names = sorted(os.path.relpath(files[m], repo) for m in component)
            print("circle: " + ", ".join(names))
            for a in component:
                for b in component:
                    if b in graph[a]:
                        paths = ", ".join(sorted(why[(a, b)])[:4])
                        print(f"  {os.path.relpath(files[a], repo)} uses "
                              f"{os.path.relpath(files[b], repo)}: {paths}")
    if circles == 0:
        print("no file circles")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
