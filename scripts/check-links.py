#!/usr/bin/env python3
"""Checks the links of the built book, of the repository's Markdown files, and the
benchmark citations in its code.

In the book (mdBook's HTML): every relative `href` and `src` names a file that exists,
and every `#fragment` an element id in the page it points at. A link that leaves the book
is one of the pages' links to the repository, which mdBook renamed to `.html`: it is
checked in the page's Markdown source instead, so give the sources (docs/src/*.md) among
the Markdown files. In the Markdown files given: every relative link names a file of the
repository, and a `#fragment` into a Markdown file one of its headings, slugged as mdBook
and GitHub slug them, or an explicit `id` (`<a id="..."></a>`). Links to other sites are
not followed: the check runs offline, and a site's answer is not the book's fault.

With --citations ROOT, every file under ROOT that cites the benchmarks is checked too:
each `BENCHMARKS.md#anchor` or `bench/notes/NAME.md#anchor` (a path from ROOT, wherever it
stands: a comment, a script, a page) must name a file and an anchor in it, and code
(anything but Markdown) must cite those files by anchor, never by a section's title,
which changes as the figures do.

Usage: check-links.py BOOK_DIR [MARKDOWN_FILE ...] [--citations ROOT]
"""

import html.parser
import os
import pathlib
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


def external(link):
    parsed = urllib.parse.urlsplit(link)
    return bool(parsed.scheme) or link.startswith("//")


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        cache[path] = page
    return cache[path]


def check_book(book):
    errors = []
    inside = book.resolve()
    pages = sorted(book.rglob("*.html"))
    if not pages:
        return [f"{book}: no HTML pages (was the book built?)"]
    for page_path in pages:
        for link in parse(page_path).links:
            if external(link):
                continue
            target, _, fragment = link.partition("#")
            target = urllib.parse.unquote(target)
            dest = (page_path.parent / target).resolve() if target else page_path
            if target and inside not in dest.parents:
                continue
            if target and not dest.exists():
                errors.append(f"{page_path.relative_to(book)}: {link}: no such file")
                continue
            if fragment and dest.suffix == ".html":
                if urllib.parse.unquote(fragment) not in parse(dest).ids:
                    errors.append(f"{page_path.relative_to(book)}: {link}: no such anchor")
    return errors


def slug(heading):
    text = re.sub(r"[`*_]|<[^>]*>", "", heading).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(markdown):
    """The fragments a Markdown file answers to: its headings' slugs and explicit ids."""
    found, fence = set(), False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        match = re.match(r"^#{1,6} (.*)$", line)
        if match:
            found.add(slug(match.group(1)))
        found.update(re.findall(r"""<a\s[^>]*\b(?:id|name)=["']([^"']+)["']""", line))
    return found


def check_markdown(path):
    errors = []
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if external(link):
            continue
        target, _, fragment = link.partition("#")
        dest = (path.parent / target) if target else path
        if not dest.exists():
            errors.append(f"{path}: {link}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            errors.append(f"{path}: {link}: no such heading or anchor")
    return errors


# A citation: the path from the repository's root (after any ../ of a relative link),
# then the anchor if there is one.
CITATION = re.compile(
    r"(?<![\w/.-])(?:\.\./)*(BENCHMARKS\.md|bench/notes/[\w.-]+\.md)(#[\w-]+)?")
SKIPPED_DIRS = {".git", "target", "node_modules"}


def text_files(root):
    """The repository's text files, without descending into build outputs or hidden
    folders (target/ alone holds gigabytes)."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders
                               if name not in SKIPPED_DIRS and not name.startswith("."))
        for name in sorted(files):
            path = pathlib.Path(folder) / name
            if not path.is_file() or path.stat().st_size > 2_000_000:
                continue
            data = path.read_bytes()
            if b"\0" in data[:8192]:
                continue
            yield path, data.decode("utf-8", errors="replace")


def check_citations(root):
    errors, cited = [], 0
    # The checker's own text and its tests' fixtures cite on purpose what is not there.
    this = pathlib.Path(__file__).resolve()
    own = {this, this.with_name("test_check_links.py")}
    for path, text in text_files(root):
        if path.resolve() in own:
            continue
        code = path.suffix != ".md"
        for number, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                where = f"{path.relative_to(root)}:{number}"
                target, fragment = match.group(1), match.group(2)
                if not fragment:
                    if code:
                        errors.append(f"{where}: {target} cited without an anchor "
                                      f"(cite {target}#anchor, not a section's title)")
                    continue
                cited += 1
                dest = root / target
                if not dest.exists():
                    errors.append(f"{where}: {target}{fragment}: no such file")
                elif fragment[1:] not in anchors(dest):
                    errors.append(f"{where}: {target}{fragment}: no such heading or anchor")
    return errors, cited


def main(argv):
    args, root = argv[1:], None
    if "--citations" in args:
        at = args.index("--citations")
        if at + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        root = pathlib.Path(args[at + 1])
        del args[at:at + 2]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    book = pathlib.Path(args[0])
    errors = check_book(book)
    for markdown in args[1:]:
        errors += check_markdown(pathlib.Path(markdown))
    cited = 0
    if root is not None:
        found, cited = check_citations(root)
        errors += found
    for error in errors:
        print(f"check-links: {error}", file=sys.stderr)
    pages = len(list(book.rglob("*.html")))
    print(f"check-links: {pages} pages, {len(args) - 1} Markdown files and {cited} "
          f"benchmark citations, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
