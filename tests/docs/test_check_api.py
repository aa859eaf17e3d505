#!/usr/bin/env python3
"""Tests of check_api.py on small made-up trees: what counts as a public
template, and the message for each way docs/api.md can drift."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_api  # noqa: E402

HEADER = r"""
// template <class Commented> struct commented_out;
#pragma once
namespace allotheque {
namespace detail {
template <class T> struct hidden {};
}
namespace detail_extra {
template <class T> struct also_hidden {};
}
template <class Attr, class Nested = void, class Pred = int, class Links = char>
struct list;
template <class Attr, class Nested, class Pred, class Links>
struct list { template <class Inner> struct member {}; };
template <class Attr>
struct list<Attr, void, int, char> {};          // a specialisation: not an entry
template <class T, std::size_t N, bool Inline = N * sizeof(T) <= 4096>
struct storage {};
template <std::size_t Step = std::size_t{1} << 4, class... Values>
using spaced = list<Values...>;
template <class S>
concept source = requires(S& s) { s.allocate(); };
template <class S>
inline constexpr bool zeroed = false;
template <class S>
    requires requires { S::zeroed; }
inline constexpr bool zeroed<S> = S::zeroed;
struct plain {};
inline void near(const void*) {}
namespace layers {
template <class H, class Mutex = int>
class alignas(64) locked {};
}
} // namespace allotheque
"""

FULL_DOC = """# API
| entry | parameters |
|---|---|
| `list<Attr, Nested, Pred, Links>` | x |
| `storage<T, N, Inline>` | x |
| `spaced<Step, Values...>` | x |
| `source<S>` | x |
| `zeroed<S>` | x |
| `plain` | x |
| `near(p)` | x |
| `layers::locked<H, Mutex>` | x |
"""


class CheckApi(unittest.TestCase):
    def run_check(self, doc, header=HEADER):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "include", "allotheque", "sub"))
            os.makedirs(os.path.join(root, "docs"))
            with open(os.path.join(root, "include", "allotheque", "sub", "a.hpp"), "w") as f:
                f.write(header)
            with open(os.path.join(root, "docs", "api.md"), "w") as f:
                f.write(doc)
            return check_api.check(root, "docs/api.md", "include")

    def test_complete_document_passes(self):
        self.assertEqual(self.run_check(FULL_DOC), [])

    def test_missing_entry_is_named_with_its_header_line(self):
        problems = self.run_check(FULL_DOC.replace("| `layers::locked<H, Mutex>` | x |\n", ""))
        self.assertEqual(len(problems), 1)
        self.assertIn("missing entry `layers::locked<H, Mutex>`", problems[0])
        self.assertIn("include/allotheque/sub/a.hpp:", problems[0])

    def test_wrong_parameter_names(self):
        problems = self.run_check(FULL_DOC.replace("`source<S>`", "`source<Source>`"))
        self.assertEqual(len(problems), 2)   # the wrong entry, and source<S> then missing
        self.assertIn("docs/api.md:7: `source<Source>`: the header declares source<S>", problems[0])

    def test_wrong_parameter_count(self):
        problems = self.run_check(FULL_DOC.replace("`list<Attr, Nested, Pred, Links>`", "`list<Attr, Nested, Pred>`"))
        self.assertIn("the header declares list<Attr, Nested, Pred, Links>", problems[0])

    def test_unknown_name(self):
        problems = self.run_check(FULL_DOC + "| `velox_heap<S>` | x |\n| `nowhere` | x |\n")
        self.assertEqual(len(problems), 2)
        self.assertIn("no public template `velox_heap`", problems[0])
        self.assertIn("`nowhere` is not declared", problems[1])

    def test_template_without_parameters(self):
        problems = self.run_check(FULL_DOC.replace("`plain`", "`plain`") + "| `storage` | x |\n")
        self.assertEqual(len(problems), 1)
        self.assertIn("`storage` is a template: write storage<T, N, Inline>", problems[0])

    def test_detail_and_member_templates_are_not_entries(self):
        problems = self.run_check(FULL_DOC + "| `hidden<T>` | x |\n")
        self.assertEqual(len(problems), 1)
        self.assertIn("no public template `hidden`", problems[0])

    def test_not_an_entry(self):
        problems = self.run_check(FULL_DOC + "| `list<A> extra` | x |\n")
        self.assertIn("is not an entry", problems[0])

    def test_code_fences_are_ignored(self):
        self.assertEqual(self.run_check(FULL_DOC + "```\n| `nowhere` | x |\n```\n"), [])

    def test_missing_document(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "include", "allotheque"))
            self.assertEqual(check_api.check(root, "docs/api.md", "include"), ["docs/api.md:1: no such file"])

    def test_command_line_exit_status(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "include", "allotheque"))
            os.makedirs(os.path.join(root, "docs"))
            with open(os.path.join(root, "include", "allotheque", "a.hpp"), "w") as f:
                f.write(HEADER)
            with open(os.path.join(root, "docs", "api.md"), "w") as f:
                f.write(FULL_DOC)
            self.assertEqual(check_api.main(["--root", root]), 0)
            with open(os.path.join(root, "docs", "api.md"), "w") as f:
                f.write("# empty\n")
            self.assertEqual(check_api.main(["--root", root]), 1)


if __name__ == "__main__":
    unittest.main()
