#!/usr/bin/env python3
"""Turn the ```cpp / ```c++ blocks of the documentation into C++ sources.

Run by tests/docs/CMakeLists.txt at configure time; the convention it applies
is described in tests/docs/README.md. Every generated line of documentation
code carries a #line directive, so a compiler error names the Markdown file
and line, e.g. `docs/locality.md:63:5: error: ...`.

Usage: extract_blocks.py --root SRC --out DIR --include-dir DIR FILE.md...
  (FILE paths relative to --root). Writes DIR/blocks.cmake for CMake and one
  .cpp per whole translation unit, plus DIR/fragments.cpp for all fragments.
Exit status 1, with `file:line: message` on stderr, on a malformed document.
"""

import argparse
import os
import re
import sys

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^ \t`{]*)")
MARKER = re.compile(r"^[ \t]*<!--[ \t]*doc-test(?=[ \t:]|-->|$)(?P<rest>.*)$")
INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b")
MAIN = re.compile(r"\bint\s+main\s*\(")
CPP_INFO = {"cpp", "c++"}
MODES = {"skip", "namespace", "statements", "check"}

# What a fragment (a block without #include) sees besides every public
# allotheque header: the standard headers documentation code tends to use.
FRAGMENT_STD_HEADERS = [
    "algorithm", "array", "cstddef", "cstdint", "cstdio", "cstdlib", "deque", "forward_list",
    "functional", "iostream", "list", "map", "memory", "memory_resource", "mutex", "new", "set",
    "string", "string_view", "thread", "type_traits", "unordered_map", "unordered_set", "utility", "vector",
]


class DocError(Exception):
    def __init__(self, path, line, message):
        super().__init__(f"{path}:{line}: {message}")


class Marker:
    def __init__(self, path, line, mode, reason, setup, setup_line):
        self.path, self.line, self.mode, self.reason = path, line, mode, reason
        self.setup, self.setup_line = setup, setup_line


class Block:
    def __init__(self, path, line, lines, marker, check=False):
        self.path = path          # relative to the source root
        self.line = line          # line of the block's first code line
        self.lines = lines
        self.marker = marker
        self.check = check        # a doc-test: check comment, not a visible block
        slug = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_")
        self.name = f"{slug}_{line}"
        self.where = f"{path}:{line}"

    @property
    def mode(self):
        return self.marker.mode if self.marker else None

    def has_include(self):
        return any(INCLUDE.match(l) for l in self.lines)

    def has_main(self):
        return MAIN.search("\n".join(self.lines)) is not None


def dedent(text, indent):
    """A line of a block or comment indented like its list item, without that indent."""
    return text[len(indent):] if text.startswith(indent) else text.lstrip(" \t")


def parse_marker(path, lines, i):
    """The doc-test comment starting at lines[i] (0-based). Returns (Marker, next index)."""
    start = i + 1
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip(" \t"))]
    rest = MARKER.match(lines[i]).group("rest")
    if "-->" in rest:
        head, tail = rest.split("-->", 1)
        if tail.strip():
            raise DocError(path, start, "text after the doc-test comment's closing '-->'")
        setup, i = [], i + 1
    else:
        head, setup, i = rest, [], i + 1
        while True:
            if i == len(lines):
                raise DocError(path, start, "doc-test comment has no closing '-->'")
            if lines[i].strip() == "-->":
                i += 1
                break
            if "-->" in lines[i]:
                raise DocError(path, i + 1, "close a doc-test comment with '-->' on a line of its own")
            setup.append(dedent(lines[i], indent))
            i += 1
    head = head.strip()
    if head.startswith(":"):
        head = head[1:].strip()
    words = head.split(None, 1)
    mode = words[0] if words else None
    if mode is not None and mode not in MODES:
        raise DocError(path, start, f"unknown doc-test mode '{mode}' (skip, namespace, statements or check)")
    if mode == "skip":
        if len(words) < 2:
            raise DocError(path, start, "doc-test: skip needs a reason, e.g. <!-- doc-test: skip needs root -->")
        if setup:
            raise DocError(path, start, "a skipped block takes no setup code")
    elif mode == "check" and not any(l.strip() for l in setup):
        raise DocError(path, start, "doc-test: check has no code")
    elif len(words) > 1:
        raise DocError(path, start, f"unexpected text after doc-test mode '{mode}': '{words[1]}'")
    reason = words[1] if mode == "skip" else None
    return Marker(path, start, mode, reason, setup, start + 1), i


def extract(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, marker, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        if MARKER.match(line):
            if marker:
                raise DocError(path, i + 1, f"second doc-test comment; the one at line {marker.line} has no block")
            marker, i = parse_marker(path, lines, i)
            if marker.mode == "check":      # hidden code of its own, tied to no block
                blocks.append(Block(path, marker.setup_line, marker.setup, None, check=True))
                marker = None
            continue
        m = FENCE.match(line)
        if not m:
            if marker and line.strip():
                raise DocError(path, marker.line, "a doc-test comment must come right before a ```cpp block")
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").lower()
        opened = i + 1
        body, i = [], i + 1
        while True:
            if i == len(lines):
                raise DocError(path, opened, f"code block opened here is never closed ({fence})")
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                i += 1
                break
            body.append(dedent(lines[i], indent))
            i += 1
        if info in CPP_INFO:
            blocks.append(Block(path, opened + 1, body, marker))
        elif marker:
            raise DocError(path, marker.line, f"a doc-test comment must come right before a ```cpp block, not ```{info}")
        marker = None
    if marker:
        raise DocError(path, marker.line, "doc-test comment at the end of the file has no block")
    return blocks


def classify(block):
    """'skip', 'program', 'unit', 'namespace', 'statements' or 'check'."""
    if block.check:
        return "check"
    mode = block.mode
    if mode == "skip":
        return "skip"
    if block.has_include():
        if mode:
            raise DocError(block.path, block.marker.line,
                           f"a block with #include lines is a whole translation unit; '{mode}' does not apply")
        return "program" if block.has_main() else "unit"
    if block.has_main():
        raise DocError(block.path, block.line,
                       "a block that defines main() is compiled as it is: #include what it uses")
    return mode or "statements"


def with_lines(block, out):
    """Append the block's setup and code to `out`, each behind a #line directive."""
    if block.marker and block.marker.setup:
        out.append(f'#line {block.marker.setup_line} "{block.path}"')
        out.extend(block.marker.setup)
    out.append(f'#line {block.line} "{block.path}"')
    out.extend(block.lines)


def unit_source(block):
    out = [f"// {block.where}: generated by tests/docs/extract_blocks.py, do not edit."]
    with_lines(block, out)
    return "\n".join(out) + "\n"


def fragments_source(fragments, headers, out_name):
    out = [f"// The documentation's fragments: generated by tests/docs/extract_blocks.py, do not edit.",
           f"// Each sees every public allotheque header, common standard headers and",
           f"// `namespace al = allotheque;`. Unused-variable warnings are off here",
           f"// (tests/docs/CMakeLists.txt): a fragment may declare what it only shows."]
    out += [f"#include <{h}>" for h in headers]
    out += [f"#include <{h}>" for h in FRAGMENT_STD_HEADERS]
    out.append("namespace al = allotheque;")
    for kind, block in fragments:
        out.append("")
        out.append(f"// {block.where} ({kind})")
        if kind == "namespace":
            out.append(f"namespace doc_{block.name} {{")
            with_lines(block, out)
            out.append(f'#line {len(out) + 2} "{out_name}"')
            out.append(f"}}  // namespace doc_{block.name}")
        else:
            out.append(f"void doc_{block.name}();")
            out.append(f"void doc_{block.name}() {{")
            with_lines(block, out)
            out.append(f'#line {len(out) + 2} "{out_name}"')
            out.append("}")
    return "\n".join(out) + "\n"


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def cmake_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace(";", "\\;") + '"'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--include-dir", required=True)
    ap.add_argument("docs", nargs="+")
    args = ap.parse_args()

    try:
        blocks = [b for d in args.docs for b in extract(args.root, d)]
        kinds = [(classify(b), b) for b in blocks]
    except DocError as e:
        print(e, file=sys.stderr)
        return 1

    headers = sorted(os.path.relpath(os.path.join(dp, f), args.include_dir).replace(os.sep, "/")
                     for dp, _, fs in os.walk(os.path.join(args.include_dir, "allotheque"))
                     for f in fs if f.endswith(".hpp"))
    os.makedirs(args.out, exist_ok=True)
    written = set()
    units, programs, fragments, skipped = [], [], [], []
    for kind, b in kinds:
        if kind == "skip":
            skipped.append(b)
        elif kind in ("program", "unit"):
            src = os.path.join(args.out, f"{b.name}.cpp")
            write_if_changed(src, unit_source(b))
            written.add(os.path.basename(src))
            (programs if kind == "program" else units).append((b, src))
        else:
            fragments.append((kind, b))
    fragments_cpp = ""
    if fragments:
        fragments_cpp = os.path.join(args.out, "fragments.cpp")
        write_if_changed(fragments_cpp, fragments_source(fragments, headers, "fragments.cpp"))
        written.add("fragments.cpp")
    for f in os.listdir(args.out):     # blocks that moved or went away
        if f.endswith(".cpp") and f not in written:
            os.remove(os.path.join(args.out, f))

    cm = ["# Generated by tests/docs/extract_blocks.py: the documentation's C++ blocks."]
    cm.append(f"set(doc_fragments_source {cmake_quote(fragments_cpp)})")
    cm.append("set(doc_unit_sources " + " ".join(cmake_quote(s) for _, s in units) + ")")
    cm.append("set(doc_programs " + " ".join(b.name for b, _ in programs) + ")")
    for b, src in programs:
        cm.append(f"set(doc_program_{b.name}_source {cmake_quote(src)})")
        cm.append(f"set(doc_program_{b.name}_where {cmake_quote(b.where)})")
    write_if_changed(os.path.join(args.out, "blocks.cmake"), "\n".join(cm) + "\n")

    checks = sum(1 for kind, _ in fragments if kind == "check")
    print(f"{len(blocks) - checks} C++ blocks and {checks} hidden checks in {len(args.docs)} files: "
          f"{len(programs)} programs (compiled and run), {len(units)} translation units, "
          f"{len(fragments) - checks} fragments, {len(skipped)} skipped"
          + "".join(f"\n  skipped {b.where}: {b.marker.reason}" for b in skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
