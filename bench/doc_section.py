"""Writes a benchmark's generated section into docs/benchmarks.md: the text between its
BEGIN and END markers is replaced (or the section appended when the markers are absent),
through a temporary file so that an interrupted write leaves the old document."""

import os


def write_section(doc, begin, end, section):
    try:
        text = open(doc).read()
    except FileNotFoundError:
        text = "# TierFS benchmarks\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(doc + ".tmp", "w") as f:
        f.write(text)
    os.replace(doc + ".tmp", doc)
