#!/usr/bin/env python3
"""Tests of extract_blocks.py: how Markdown becomes C++, every malformed
document's message, and that a compiler error in a block names the Markdown
file and line. ctest `docs_extractor`; DOCS_TEST_CXX and DOCS_TEST_INCLUDES
(colon-separated) name the compiler and include directories for the
end-to-end cases, which are skipped when DOCS_TEST_CXX is unset."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extract_blocks as eb  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extract_blocks.py")
INCLUDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")


class Doc:
    """A temporary source root holding one Markdown file."""

    def __init__(self, text, name="doc.md"):
        self.dir = tempfile.TemporaryDirectory()
        self.root, self.name = self.dir.name, name
        with open(os.path.join(self.root, name), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))

    def blocks(self):
        return eb.extract(self.root, self.name)

    def kinds(self):
        return [(eb.classify(b), b.line) for b in self.blocks()]

    def run(self, include_dir=INCLUDE_DIR):
        out = os.path.join(self.root, "out")
        return subprocess.run([sys.executable, SCRIPT, "--root", self.root, "--out", out,
                               "--include-dir", include_dir, self.name],
                              capture_output=True, text=True), out


class DocTest(unittest.TestCase):
    def doc(self, text):
        d = Doc(text)
        self.addCleanup(d.dir.cleanup)
        return d


class Classification(DocTest):
    def test_kinds_and_first_code_lines(self):
        d = self.doc("""\
            text
            ```cpp
            #include <cstdio>
            int main() { std::puts("hi"); }
            ```
            ```c++
            #include <vector>
            std::vector<int> v;
            ```
            ```cpp
            int x = 1;
            ```
            <!-- doc-test: namespace -->
            ```cpp
            template <class T> struct box { T t; };
            ```
            <!-- doc-test: skip needs a file system -->

            ```cpp
            this is not C++
            ```
            ```sh
            echo not C++ either
            ```
            <!-- doc-test: check
            static_assert(sizeof(int) >= 2);
            -->
            """)
        self.assertEqual(d.kinds(), [("program", 3), ("unit", 7), ("statements", 11), ("namespace", 15),
                                     ("skip", 20), ("check", 26)])
        self.assertEqual(d.blocks()[4].marker.reason, "needs a file system")

    def test_indented_block_in_a_list_item_with_setup(self):
        d = self.doc("""\
            1. item

               <!-- doc-test
               struct Node { int key; };
               -->
               ```cpp
               Node n{1};
                 int deeper = n.key;
               ```
            """)
        (b,) = d.blocks()
        self.assertEqual(b.line, 7)
        self.assertEqual(b.lines, ["Node n{1};", "  int deeper = n.key;"])
        self.assertEqual(b.marker.setup, ["struct Node { int key; };"])
        self.assertEqual(b.marker.setup_line, 4)

    def test_longer_fences_and_tildes(self):
        d = self.doc("""\
            ````cpp
            const char* s = R"(```)";
            ````
            ~~~cpp
            int y = 2;
            ~~~
            """)
        self.assertEqual([b.lines for b in d.blocks()], [['const char* s = R"(```)";'], ["int y = 2;"]])

    def test_markers_inside_other_blocks_are_text(self):
        d = self.doc("""\
            ```md
            <!-- doc-test: bogus -->
            ```
            """)
        self.assertEqual(d.blocks(), [])


class MalformedDocuments(DocTest):
    CASES = [
        ("<!-- doc-test: frobnicate -->\n```cpp\nint a;\n```\n", 1, "unknown doc-test mode 'frobnicate'"),
        ("<!-- doc-test: skip -->\n```cpp\nint a;\n```\n", 1, "skip needs a reason"),
        ("<!-- doc-test: skip why\nint a;\n-->\n```cpp\nint a;\n```\n", 1, "a skipped block takes no setup code"),
        ("<!-- doc-test: namespace extra -->\n```cpp\nint a;\n```\n", 1, "unexpected text after doc-test mode"),
        ("<!-- doc-test -->\nsome prose\n```cpp\nint a;\n```\n", 1, "right before a ```cpp block"),
        ("<!-- doc-test -->\n```sh\nls\n```\n", 1, "right before a ```cpp block, not ```sh"),
        ("x\n```cpp\nint a;\n", 2, "never closed"),
        ("<!-- doc-test\nint a;\n", 1, "no closing '-->'"),
        ("<!-- doc-test\nint a; -->\n```cpp\nint b;\n```\n", 2, "on a line of its own"),
        ("<!-- doc-test --> trailing\n```cpp\nint a;\n```\n", 1, "text after the doc-test comment's closing"),
        ("<!-- doc-test -->\n<!-- doc-test -->\n```cpp\nint a;\n```\n", 2, "the one at line 1 has no block"),
        ("text\n<!-- doc-test -->\n", 2, "at the end of the file has no block"),
        ("<!-- doc-test: check\n-->\n", 1, "check has no code"),
        ("<!-- doc-test: statements -->\n```cpp\n#include <vector>\n```\n", 1, "whole translation unit"),
        ("```cpp\nint main() { return 0; }\n```\n", 2, "#include what it uses"),
    ]

    def test_each_error_names_file_and_line(self):
        for text, line, message in self.CASES:
            with self.subTest(text=text):
                r, _ = self.doc(text).run()
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(f"doc.md:{line}: ", r.stderr)
                self.assertIn(message, r.stderr)


class Output(DocTest):
    def test_files_and_stale_removal(self):
        d = self.doc("```cpp\n#include <cstdio>\nint main() {}\n```\n```cpp\nint a = 0;\n```\n")
        r, out = d.run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["blocks.cmake", "doc_md_2.cpp", "fragments.cpp"])
        with open(os.path.join(out, "blocks.cmake")) as f:
            cm = f.read()
        self.assertIn("set(doc_programs doc_md_2)", cm)
        self.assertIn('set(doc_program_doc_md_2_where "doc.md:2")', cm)
        with open(os.path.join(d.root, d.name), "w") as f:
            f.write("no code any more\n")
        r, out = d.run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(out), ["blocks.cmake"])


@unittest.skipUnless(os.environ.get("DOCS_TEST_CXX"), "DOCS_TEST_CXX not set")
class CompilerMessages(DocTest):
    def compile(self, source, extra_includes=()):
        includes = list(extra_includes) + [i for i in os.environ.get("DOCS_TEST_INCLUDES", "").split(":") if i]
        cmd = [os.environ["DOCS_TEST_CXX"], "-std=c++20", "-fsyntax-only", source]
        cmd += [f"-I{i}" for i in includes]
        return subprocess.run(cmd, capture_output=True, text=True)

    def test_errors_point_into_the_markdown(self):
        d = self.doc("""\
            # title
            <!-- doc-test
            int fine = 0;
            undeclared_in_setup x;
            -->
            ```cpp
            int ok = fine;
            undeclared_in_block y;
            ```
            ```cpp
            #include <cstdio>
            int main() { undeclared_in_program(); }
            ```
            """)
        # One empty header instead of the library's (cheaper): only the line mapping is under test.
        stub = os.path.join(d.root, "include")
        os.makedirs(os.path.join(stub, "allotheque"))
        with open(os.path.join(stub, "allotheque", "stub.hpp"), "w") as f:
            f.write("namespace allotheque {}\n")
        r, out = d.run(include_dir=stub)
        self.assertEqual(r.returncode, 0, r.stderr)
        frag = self.compile(os.path.join(out, "fragments.cpp"), [stub])
        self.assertNotEqual(frag.returncode, 0)
        self.assertNotIn("fragments.cpp:", frag.stderr)     # every error is in the document
        self.assertIn("doc.md:4:", frag.stderr)
        self.assertIn("doc.md:8:", frag.stderr)
        prog = self.compile(os.path.join(out, "doc_md_11.cpp"))
        self.assertNotEqual(prog.returncode, 0)
        self.assertIn("doc.md:12:", prog.stderr)

    def test_a_correct_fragment_compiles(self):
        d = self.doc("```cpp\nal::kingsley_heap<> heap;\nvoid* p = heap.allocate(al::request{16});\n```\n")
        r, out = d.run()
        self.assertEqual(r.returncode, 0, r.stderr)
        c = self.compile(os.path.join(out, "fragments.cpp"))
        self.assertEqual(c.returncode, 0, c.stderr)


if __name__ == "__main__":
    unittest.main()
