#!/usr/bin/env python3
"""Check docs/api.md against the public headers.

The reference is kept by hand; this keeps it honest in both directions:

  1. every public template declared at namespace scope in include/allotheque/
     (class, struct, alias, concept and variable templates; namespaces whose
     name starts with `detail` are internal) has an entry in docs/api.md, and
     the entry lists the template's parameters by the header's names, in order
     (`Ts...` for a pack);
  2. every entry of docs/api.md names something the headers declare in that
     namespace: a template with exactly those parameters, or (entry without
     `<...>`) any class, alias, concept, enumeration, variable or function.

An *entry* is the first `code span` of the first cell of a table row. Its name
is written relative to namespace allotheque (`layers::locked<H, Mutex>`); a
function is written with parentheses (`near(p)`), which are not checked.

Usage: check_api.py --root SRC [--doc docs/api.md] [--include include]
Exit status 0 when both directions hold, 1 with one `file:line: message` per
problem on stderr otherwise, 2 on bad usage.
"""

import argparse
import glob
import os
import re
import sys

IDENT = r"[A-Za-z_]\w*"


def strip_code(text):
    """Blank out comments and literals, keeping offsets (and so line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def template_params(text, start):
    """Parse `<...>` of a template head starting after `template <`; returns
    (parameter text, index after `>`). Angle brackets inside parentheses or
    braces, `<=`, `>=` and `<<` are not brackets."""
    depth, paren, i = 1, 0, start
    while depth:
        if i >= len(text):
            raise ValueError("unterminated template parameter list")
        c = text[i]
        two = text[i:i + 2]
        if c in "({[":
            paren += 1
        elif c in ")}]":
            paren -= 1
        elif paren == 0 and two in ("<=", ">=", "<<"):
            i += 2
            continue
        elif paren == 0 and c == "<":
            depth += 1
        elif paren == 0 and c == ">":
            depth -= 1
        i += 1
    return text[start:i - 1], i


def split_top(params):
    """Split at commas outside brackets, with the bracket rules of template_params."""
    parts, angle, paren, cur, i = [], 0, 0, "", 0
    while i < len(params):
        c, two = params[i], params[i:i + 2]
        if paren == 0 and two in ("<=", ">=", "<<"):
            cur += two
            i += 2
            continue
        if c in "({[":
            paren += 1
        elif c in ")}]":
            paren -= 1
        elif paren == 0 and c == "<":
            angle += 1
        elif paren == 0 and c == ">":
            angle -= 1
        if c == "," and angle == 0 and paren == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        parts.append(cur)
    return parts


def param_names(params):
    names = []
    for p in split_top(params):
        decl = p.split("=", 1)[0].strip()
        decl = re.sub(r"<.*>", "<>", decl)   # template template parameters
        pack = "..." in decl
        m = re.search(r"(" + IDENT + r")\s*$", decl.replace("...", " "))
        keyword_only = m is None or m.group(1) in ("class", "typename", "auto", "bool", "int", "unsigned")
        name = "?" if keyword_only else m.group(1)
        names.append(name + ("..." if pack else ""))
    return names


class Decl:
    def __init__(self, ns, name, kind, params, path, line):
        self.ns, self.name, self.kind, self.params = ns, name, kind, params
        self.path, self.line = path, line

    @property
    def qualified(self):
        return f"{self.ns}::{self.name}" if self.ns else self.name


TOKEN = re.compile(r"\bnamespace\s+(?P<ns>[\w:]+)\s*\{|\bnamespace\s*\{|\{|\}|\btemplate\s*<")
AFTER_HEAD = re.compile(
    r"\s*(?:requires\b(?:[^;{()]|\([^()]*\))*?)?\s*"
    r"(?:(?P<kind>class|struct|union|using|concept)\s+(?:alignas\([^)]*\)\s*)?(?P<name>" + IDENT + r")"
    r"|inline\s+constexpr\s+[\w:<>, ]+?\s(?P<var>" + IDENT + r")\s*(?P<var_next>[=;<]))")
PLAIN = re.compile(
    r"\b(?:class|struct|union|using|concept|enum(?:\s+class|\s+struct)?)\s+(?:alignas\([^)]*\)\s*)?(" + IDENT + r")"
    r"|\b(" + IDENT + r")\s*(?=\()"
    r"|\b(" + IDENT + r")\s*(?==|;|\{)")


def scan_header(path, rel):
    """Namespace-scope templates, and every name declared at namespace scope."""
    with open(path, encoding="utf-8") as f:
        text = strip_code(f.read())
    templates, names = [], set()
    stack, i = [], 0
    scope_text = {}   # namespace -> text seen at namespace scope (for plain names)

    def ns_of():
        return "::".join(n for k, n in stack if k == "ns")

    def at_namespace_scope():
        return all(k == "ns" for k, _ in stack)

    last = 0
    while True:
        m = TOKEN.search(text, i)
        if at_namespace_scope():
            scope_text.setdefault(ns_of(), []).append(text[last:m.start() if m else len(text)])
        if not m:
            break
        tok = m.group(0)
        if tok.startswith("namespace"):
            stack.append(("ns", m.group("ns") or ""))
            i = m.end()
        elif tok == "{":
            stack.append(("b", None))
            i = m.end()
        elif tok == "}":
            if stack:
                stack.pop()
            i = m.end()
        else:
            params, j = template_params(text, m.end())
            a = AFTER_HEAD.match(text, j)
            if a and at_namespace_scope():
                name = a.group("name") or a.group("var")
                nxt = text[a.end():a.end() + 1] if a.group("name") else a.group("var_next")
                specialisation = (nxt == "<") if a.group("var") else text[a.end():].lstrip().startswith("<")
                kind = a.group("kind") or "variable"
                if not specialisation and kind != "union":
                    line = text.count("\n", 0, m.start()) + 1
                    templates.append(Decl(ns_of(), name, kind, param_names(params), rel, line))
            i = j
        last = i
    for ns, chunks in scope_text.items():
        for mm in PLAIN.finditer(" ".join(chunks)):
            nm = next(g for g in mm.groups() if g)
            names.add(f"{ns}::{nm}" if ns else nm)
    return templates, names


def relative_ns(ns):
    """allotheque::layers -> layers; allotheque -> ''; None for other namespaces."""
    parts = [p for p in ns.split("::") if p]
    if not parts or parts[0] != "allotheque":
        return None
    return "::".join(parts[1:])


def is_internal(ns):
    return any(p.startswith("detail") for p in ns.split("::"))


ENTRY = re.compile(r"^\|\s*`(?P<code>[^`]+)`")
ENTRY_NAME = re.compile(r"^(?P<name>(?:" + IDENT + r"::)*" + IDENT + r")\s*(?P<rest>.*)$")


def parse_entries(doc_path):
    entries = []
    in_fence = False
    with open(doc_path, encoding="utf-8") as f:
        lines = f.readlines()
    for lineno, line in enumerate(lines, 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = ENTRY.match(line)
        if not m:
            continue
        code = m.group("code").strip()
        nm = ENTRY_NAME.match(code)
        if not nm:
            entries.append((lineno, code, None, None, False))
            continue
        rest = nm.group("rest").strip()
        params, function = None, False
        if rest.startswith("<") and rest.endswith(">"):
            params = [p.strip() for p in split_top(rest[1:-1])]
        elif rest.startswith("("):
            function = True
        elif rest:
            entries.append((lineno, code, None, None, False))
            continue
        entries.append((lineno, code, nm.group("name"), params, function))
    return entries


def check(root, doc_rel, include_rel):
    include_dir = os.path.join(root, include_rel)
    doc_path = os.path.join(root, doc_rel)
    problems = []
    if not os.path.isfile(doc_path):
        return [f"{doc_rel}:1: no such file"]
    templates, names = [], set()
    headers = sorted(glob.glob(os.path.join(include_dir, "allotheque", "**", "*.hpp"), recursive=True))
    if not headers:
        return [f"{include_rel}: no headers under allotheque/"]
    for h in headers:
        rel = os.path.relpath(h, root)
        try:
            t, n = scan_header(h, rel)
        except ValueError as e:
            problems.append(f"{rel}:1: cannot read: {e}")
            continue
        templates += t
        names |= n
    public = {}
    for d in templates:
        ns = relative_ns(d.ns)
        if ns is None or is_internal(ns):
            continue
        key = f"{ns}::{d.name}" if ns else d.name
        public.setdefault(key, []).append(d)
    plain = set()
    for q in names:
        ns, _, nm = q.rpartition("::")
        r = relative_ns(ns) if ns else None
        if r is not None and not is_internal(r):
            plain.add(f"{r}::{nm}" if r else nm)

    entries = parse_entries(doc_path)
    documented = {}
    for lineno, code, name, params, function in entries:
        if name is None:
            problems.append(f"{doc_rel}:{lineno}: `{code}` is not an entry (write `name`, `name<Params>` or `name(args)`)")
            continue
        if params is not None:
            decls = public.get(name)
            if not decls:
                problems.append(f"{doc_rel}:{lineno}: `{code}`: no public template `{name}` in {include_rel}/allotheque")
                continue
            if not any(d.params == params for d in decls):
                want = " or ".join(f"{name}<{', '.join(d.params)}> ({d.path}:{d.line})" for d in decls)
                problems.append(f"{doc_rel}:{lineno}: `{code}`: the header declares {want}")
                continue
            documented[name] = lineno
        else:
            if name in public:
                if function:
                    continue
                d = public[name][0]
                problems.append(f"{doc_rel}:{lineno}: `{code}` is a template: write {name}<{', '.join(d.params)}> ({d.path}:{d.line})")
                continue
            if name not in plain:
                problems.append(f"{doc_rel}:{lineno}: `{code}`: `{name}` is not declared in {include_rel}/allotheque")
    for key in sorted(public):
        if key not in documented:
            d = public[key][0]
            problems.append(f"{doc_rel}:1: missing entry `{key}<{', '.join(d.params)}>` ({d.kind} template, {d.path}:{d.line})")
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--doc", default="docs/api.md")
    ap.add_argument("--include", default="include")
    args = ap.parse_args(argv)
    problems = check(args.root, args.doc, args.include)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{args.doc}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"{args.doc} matches the public templates of {args.include}/allotheque")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
