#!/usr/bin/env python3
"""Tests of check-links.py on small repositories made here: a citation of the benchmarks
resolves to a heading or an explicit id or is reported with its file, line and anchor;
code that names the benchmarks without an anchor is reported, Markdown that does is not;
a Markdown link to an explicit id resolves; and a built page's link that leaves the book
is left to its Markdown source.

    python3 scripts/test_check_links.py
"""
import importlib.util
import pathlib
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("check_links", HERE / "check-links.py")
check_links = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_links)

BENCHMARKS = """# Benchmarks

<a id="h100"></a>
## NVIDIA H100 today

Figures, and [a round](bench/notes/round.md#floor).
"""

NOTE = """# A round

<a id="floor"></a>
## Against the floor

```sh
# Not a heading
```
"""


class Repository:
    """A temporary repository with BENCHMARKS.md, one note and the files given."""

    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.dir.name)
        files = {"BENCHMARKS.md": BENCHMARKS, "bench/notes/round.md": NOTE, **files}
        for name, text in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def citations(self):
        errors, cited = check_links.check_citations(self.root)
        return [error.replace(str(self.root) + "/", "") for error in errors], cited

    def close(self):
        self.dir.cleanup()


class Citations(unittest.TestCase):
    def check(self, files):
        repository = Repository(files)
        self.addCleanup(repository.close)
        return repository.citations()

    def test_anchors_by_id_and_by_heading_resolve(self):
        errors, cited = self.check({
            "src/a.rs": "// BENCHMARKS.md#h100 and bench/notes/round.md#floor\n",
            "kernels/b.cl": "/* bench/notes/round.md#against-the-floor */\n",
            "docs/src/c.md": "[x](../../BENCHMARKS.md#nvidia-h100-today)\n",
        })
        self.assertEqual(errors, [])
        # The three above and BENCHMARKS.md's own link into the note.
        self.assertEqual(cited, 5)

    def test_a_wrong_anchor_is_reported_with_its_file_and_line(self):
        errors, _ = self.check({
            "src/a.rs": "fn a() {}\n// the figures: BENCHMARKS.md#h200\n",
            "docs/src/c.md": "line\n\n[x](../../bench/notes/round.md#not-a-heading)\n",
        })
        self.assertEqual(errors, [
            "docs/src/c.md:3: bench/notes/round.md#not-a-heading: no such heading or anchor",
            "src/a.rs:2: BENCHMARKS.md#h200: no such heading or anchor",
        ])

    def test_a_missing_note_is_reported(self):
        errors, _ = self.check({"tests/t.rs": "// bench/notes/gone.md#floor\n"})
        self.assertEqual(errors, ["tests/t.rs:1: bench/notes/gone.md#floor: no such file"])

    def test_code_must_cite_an_anchor_markdown_need_not(self):
        errors, cited = self.check({
            "src/a.rs": '// BENCHMARKS.md, "NVIDIA H100 today"\n',
            "README.md": "[BENCHMARKS.md](BENCHMARKS.md) holds the figures.\n",
        })
        self.assertEqual(errors, [
            "src/a.rs:1: BENCHMARKS.md cited without an anchor "
            "(cite BENCHMARKS.md#anchor, not a section's title)",
        ])
        self.assertEqual(cited, 1)

    def test_build_outputs_and_hidden_folders_are_not_read(self):
        errors, _ = self.check({
            "target/x.rs": "// BENCHMARKS.md#gone\n",
            ".cache/y": "BENCHMARKS.md#gone\n",
        })
        self.assertEqual(errors, [])


class Markdown(unittest.TestCase):
    def test_a_link_to_an_explicit_id_resolves_and_a_wrong_one_does_not(self):
        repository = Repository({
            "docs/src/page.md": "[a](../../BENCHMARKS.md#h100) [b](../../BENCHMARKS.md#h300)\n",
        })
        self.addCleanup(repository.close)
        errors = check_links.check_markdown(repository.root / "docs/src/page.md")
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].endswith(
            "docs/src/page.md: ../../BENCHMARKS.md#h300: no such heading or anchor"), errors)

    def test_a_fenced_line_is_not_a_heading(self):
        repository = Repository({})
        self.addCleanup(repository.close)
        found = check_links.anchors(repository.root / "bench/notes/round.md")
        self.assertEqual(found, {"a-round", "floor", "against-the-floor"})


class Book(unittest.TestCase):
    def test_links_leaving_the_book_are_left_to_the_sources(self):
        repository = Repository({
            "target/book/page.html":
                '<a href="../../BENCHMARKS.html#h100">x</a><a href="gone.html">y</a>',
        })
        self.addCleanup(repository.close)
        errors = check_links.check_book(repository.root / "target/book")
        self.assertEqual([error.split(": ", 1)[1] for error in errors],
                         ["gone.html: no such file"])


if __name__ == "__main__":
    unittest.main()
