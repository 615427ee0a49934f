#!/usr/bin/env python3
"""Checks that every link in README.md and docs/**/*.md resolves.

  tools/check_doc_links.py [--root DIR] [--allow-missing PATH ...]

A relative link must name an existing file or directory (relative to the
Markdown file that holds it); a `#anchor`, alone or after a Markdown file,
must be one of that file's headings as GitHub spells it (lower case,
punctuation but hyphens and underscores dropped, spaces as hyphens, `-1`,
`-2`, ... for repeats). Absolute URLs are not fetched. Links inside code
blocks and code spans are not links. `--allow-missing` names files that
are expected to be generated elsewhere (paths from the root); a link to one
is reported but does not fail. Prints each broken link with its file and
line, then a count; exits 1 if any link is broken.
"""
import argparse
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_slug(title):
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # links keep their text
    title = title.replace("`", "").strip().lower()
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def strip_code(lines):
    """The lines with fenced blocks blanked and code spans removed."""
    out, fenced = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return out


def anchors(path, cache={}):
    if path not in cache:
        seen, result = {}, set()
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        fenced = False
        for line in lines:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if not m:
                continue
            slug = github_slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            result.add(slug if n == 0 else f"{slug}-{n}")
        cache[path] = result
    return cache[path]


def markdown_files(root):
    yield os.path.join(root, "README.md")
    for base, _, files in os.walk(os.path.join(root, "docs")):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(base, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--allow-missing", nargs="*", default=[])
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    allowed = {os.path.normpath(os.path.join(root, p)) for p in args.allow_missing}

    checked, broken, pending = 0, 0, 0
    for path in markdown_files(root):
        with open(path, encoding="utf-8") as f:
            lines = strip_code(f.read().split("\n"))
        rel = os.path.relpath(path, root)
        for number, line in enumerate(lines, 1):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                checked += 1
                file_part, _, anchor = target.partition("#")
                dest = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                        if file_part else path)
                problem = None
                if not os.path.exists(dest):
                    if dest in allowed:
                        pending += 1
                        print(f"{rel}:{number}: {target}: not there yet (allowed)")
                        continue
                    problem = "no such file"
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problem = f"no heading #{anchor} in {os.path.relpath(dest, root)}"
                if problem:
                    broken += 1
                    print(f"{rel}:{number}: {target}: {problem}")
    print(f"{checked} links checked: {broken} broken, {pending} to files not there yet")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
