#!/usr/bin/env python3
"""Checks the links of the built book and of the repository's Markdown front pages.

In the book (mdBook's HTML): every relative `href` and `src` names a file that exists,
and every `#fragment` an element id in the page it points at. In the Markdown files given
(README.md): every relative link names a file of the repository, and a `#fragment` into
a Markdown file one of its headings, slugged as mdBook and GitHub slug them. Links to
other sites are not followed: the check runs offline, and a site's answer is not the
book's fault.

Usage: check-links.py BOOK_DIR [MARKDOWN_FILE ...]
"""

import html.parser
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


def headings(markdown):
    slugs, fence = set(), False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"^#{1,6} (.*)$", line)
        if match:
            slugs.add(slug(match.group(1)))
    return slugs


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
        elif fragment and dest.suffix == ".md" and fragment not in headings(dest):
            errors.append(f"{path}: {link}: no such heading")
    return errors


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    book = pathlib.Path(argv[1])
    errors = check_book(book)
    for markdown in argv[2:]:
        errors += check_markdown(pathlib.Path(markdown))
    for error in errors:
        print(f"check-links: {error}", file=sys.stderr)
    pages = len(list(book.rglob("*.html")))
    print(f"check-links: {pages} pages and {len(argv) - 2} Markdown files, "
          f"{len(errors)} broken links")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
