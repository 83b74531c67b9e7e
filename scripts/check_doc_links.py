#!/usr/bin/env python3
"""Every relative link in the project's Markdown resolves: the file exists, and a `#anchor`
into a Markdown file names one of its headings (as GitHub makes anchors from headings).

    python3 scripts/check_doc_links.py          # from anywhere in the repository

Prints each broken link as FILE:LINE: TARGET (why) and exits 1 if there is one. Links to web
addresses are not checked; nothing is fetched.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", "target", "node_modules"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            if name.endswith(".md"):
                yield os.path.join(dirpath, name)


def prose_lines(path):
    """(line number, text) outside fenced code blocks, with inline code removed."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    for _, line in heading_lines(path):
        base = slug(line)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def heading_lines(path):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m and not fenced:
                yield number, m.group(1)


def main():
    broken = []
    cache = {}
    checked = 0
    for path in sorted(markdown_files()):
        for number, line in prose_lines(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # a web address or mailto:
                checked += 1
                file_part, _, anchor = target.partition("#")
                where = os.path.relpath(path, ROOT)
                dest = path if not file_part else os.path.normpath(
                    os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    broken.append(f"{where}:{number}: {target} (no such file)")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append(f"{where}:{number}: {target} (no such heading)")
    for b in broken:
        print(b)
    print(f"{len(broken)} of {checked} relative links broken" if broken
          else f"all {checked} relative links resolve")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
