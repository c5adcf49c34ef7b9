"""Doc-site Markdown dialects, in one place: the rules that turn Hugo, MkDocs Material, GitBook and Docusaurus source
into the CommonMark that :mod:`anaphora.ingest.markdown` parses, and the HTML inside it into text.

What the rules keep is what a reader of the rendered page reads: the text inside admonitions, tabs, hints and
collapsible blocks stays and their tags go; a tab's, a collapsible block's or a titled admonition's title becomes a
label line; image alt text stays, tracking pixels and badges go; diagram source (mermaid, PlantUML, ...) is not
indexed, because quoting it answers nothing. Transclusion (Hugo ``docs/shared``, ``{% include %}``,
``{% include-markdown %}``, ``--8<--`` snippets) is dropped, not resolved: the included file is in the tree and is
ingested on its own, so resolving would index its text twice (53 Traefik pages include the same advert) and would
read files named by the page, which could lead outside the ingested folder. Code blocks are never rewritten.

The block rules run line by line outside fenced code (:func:`unwrap`); the inline rules (shortcodes, tags) run on
the lines that are left. markdown-it cannot do these: an MkDocs admonition's four-space-indented body is an
indented code block to CommonMark, and shortcodes are text to it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from html.parser import HTMLParser

# --- fenced code ---------------------------------------------------------------------------------------------------
FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
DIAGRAM_LANGUAGES = frozenset({"mermaid", "plantuml", "puml", "dot", "graphviz", "d2", "ditaa", "nomnoml"})


@dataclass(frozen=True, slots=True)
class FenceInfo:
    """A fence's info string read as MkDocs / pymdownx write it: ```` ```yaml tab="File (YAML)" ````,
    ```` ``` { .yaml title="traefik.yml" } ````, ```` ```bash title="x" ````."""

    language: str
    label: str

    @property
    def is_diagram(self) -> bool:
        return self.language.lower() in DIAGRAM_LANGUAGES


def fence_info(info: str) -> FenceInfo:
    text = info.strip().strip("{}").strip()
    attributes = dict(re.findall(r'(\w[\w-]*)\s*=\s*"([^"]*)"', text))
    words = re.sub(r'\w[\w-]*\s*=\s*"[^"]*"', " ", text).split()
    language = next((w.lstrip(".") for w in words if not w.startswith("#")), "")
    label = attributes.get("tab") or attributes.get("title") or attributes.get("label") or ""
    return FenceInfo(language, label.strip())


# --- block containers: MkDocs Material, Docusaurus --------------------------------------------------------------------
# !!! note "Title" · ??? tip · ???+ example "Title" (body indented by four spaces)
_ADMONITION = re.compile(
    r'^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+[\w-]+)*(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$'
)
# === "Tab" (pymdownx.tabbed; body indented by four spaces)
_TAB = re.compile(r'^(?P<indent>[ \t]*)===\+?[ \t]+"(?P<title>[^"]*)"[ \t]*$')
# :::note Title · :::tip[Title] · ::: (Docusaurus admonitions; the body is not indented)
_COLON_FENCE = re.compile(
    r"^[ \t]*:::+[ \t]*(?P<kind>[\w-]*)[ \t]*(?:\[(?P<bracket>[^\]]*)\]|(?P<title>[^{\n]*?))?[ \t]*(?:\{.*\})?$"
)
# MDX module statements: import Tabs from '@theme/Tabs'; export const x = ...
_MDX_STATEMENT = re.compile(
    r"^(?:import\s+[\w{}*,\s]+\s+from\s+['\"][^'\"]+['\"];?|import\s+['\"][^'\"]+['\"];?|export\s+(?:const|default|function|let)\b.*)\s*$"
)
# kramdown / attr_list lines: {: .subtitle } · {#anchor} alone on a line
_ATTRIBUTE_LINE = re.compile(r"^[ \t]*\{:?[ \t]*[.#][^}]*\}[ \t]*$")
# a heading's trailing attributes: "## Title {#anchor}" · "## Title { .class }"
HEADING_ATTRIBUTES = re.compile(r"\s*\{:?\s*[#.][^}]*\}\s*$")
# pymdownx.snippets: --8<-- "file.md"
_SNIPPET = re.compile(r"^[ \t]*-{1,2}8<-{1,2}[ \t]*(?:\"[^\"]*\"|'[^']*')?[ \t]*$")

# --- shortcodes and template tags: Hugo, GitBook, Jinja-style ------------------------------------------------------
# {{< name key="value" >}} · {{% name %}} · {{< /name >}} (Hugo)
_HUGO = re.compile(r"\{\{([<%])-?\s*(?P<close>/?)\s*(?P<name>[\w./-]+)(?P<args>(?:[^}]|\}(?!\}))*?)\s*-?[>%]\}\}")
# {% name args %} · {% endname %} (GitBook, MkDocs include-markdown, Jekyll)
_TAG = re.compile(r"\{%-?\s*(?P<name>[\w-]+)(?P<args>.*?)\s*-?%\}")
# shortcodes whose text is the label of what follows them
_LABELLED = frozenset(
    {"tab", "tab-content", "tabitem", "collapse", "details", "expand", "code", "admonition", "hint", "qa"}
)
_LABEL_KEYS = ("title", "name", "label", "heading", "summary")
# shortcodes whose whole content is not text a reader reads (diagram source)
_HIDDEN = frozenset({"mermaid", "plantuml", "diagram", "graphviz"})


def _arguments(args: str) -> dict[str, str]:
    """``type="note" title="S3"`` -> {"type": "note", "title": "S3"}; positional values are left out."""
    try:
        parts = shlex.split(args)
    except ValueError:  # an unbalanced quote: read what can be read
        parts = args.split()
    found = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            found[key.strip().lower()] = value.strip()
    return found


def _label(name: str, args: str) -> str:
    """The label line a container tag leaves behind (a tab's or a block's title), or ""."""
    if name.lower() not in _LABELLED:
        return ""
    arguments = _arguments(args)
    return next((arguments[k] for k in _LABEL_KEYS if arguments.get(k)), "")


def _label_line(label: str) -> str:
    return f"{label.rstrip(':')}:" if label else ""


def _replace_tag(name: str, close: bool, args: str) -> str:
    lowered = name.lower()
    if close or lowered.startswith("end"):
        return ""
    if lowered == "figure":  # {{< figure src="..." caption="..." alt="..." >}}: its alt text or caption
        arguments = _arguments(args)
        return arguments.get("alt") or arguments.get("caption") or ""
    return _label_line(_label(name, args))


def strip_shortcodes(line: str) -> str:
    """Hugo shortcodes and ``{% %}`` template tags removed from one line of text; labels kept."""
    if "{{" in line:
        line = _HUGO.sub(lambda m: _replace_tag(m["name"], bool(m["close"]), m["args"]), line)
    if "{%" in line:
        line = _TAG.sub(lambda m: _replace_tag(m["name"], False, m["args"]), line)
    return line


def _opens_hidden(line: str) -> str | None:
    """The name of a diagram shortcode this line opens (its content is skipped up to the closing tag)."""
    for match in _HUGO.finditer(line):
        if not match["close"] and match["name"].lower() in _HIDDEN:
            return match["name"].lower()
    for match in _TAG.finditer(line):
        if match["name"].lower() in _HIDDEN:
            return match["name"].lower()
    return None


def _closes_hidden(line: str, name: str) -> bool:
    return any(m["close"] and m["name"].lower() == name for m in _HUGO.finditer(line)) or any(
        m["name"].lower() == f"end{name}" for m in _TAG.finditer(line)
    )


# --- the line pass -----------------------------------------------------------------------------------------------
def _indent_width(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))


def _dedent(line: str, width: int) -> str:
    expanded = line.expandtabs(4)
    return expanded[min(width, _indent_width(line)) :]


def unwrap(text: str) -> str:
    """Every block rule applied to a page's Markdown body (front matter already removed)."""
    return "\n".join(_unwrap_lines(text.splitlines()))


def _unwrap_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE_OPEN.match(line)
        if fence:  # copied as it is, up to its closing fence
            end = _fence_end(lines, index, fence["fence"])
            out.extend(lines[index : end + 1])
            index = end + 1
            continue
        container = _ADMONITION.match(line) or _TAB.match(line)
        if container:  # the title as a label, then the body, dedented and unwrapped in turn
            width = _indent_width(container["indent"])
            end = index + 1
            while end < len(lines) and (not lines[end].strip() or _indent_width(lines[end]) >= width + 4):
                end += 1
            while end > index + 1 and not lines[end - 1].strip():
                end -= 1  # trailing blank lines belong to what follows
            title = (container["title"] or "").strip()
            if title:
                label = _label_line(title) if _TAB.match(line) else title
                out.extend([container["indent"] + label, ""])
            body = [_dedent(b, width + 4) for b in lines[index + 1 : end]]
            out.extend(container["indent"] + b if b.strip() else "" for b in _unwrap_lines(body))
            out.append("")
            index = end
            continue
        colon = _COLON_FENCE.match(line) if line.lstrip().startswith(":::") else None
        if colon:
            title = (colon["bracket"] or colon["title"] or "").strip()
            out.extend([title, ""] if title else [""])
            index += 1
            continue
        hidden = _opens_hidden(line)
        if hidden:
            end = index
            while end < len(lines) and not _closes_hidden(lines[end], hidden):
                end += 1
            index = end + 1
            continue
        if _MDX_STATEMENT.match(line) or _ATTRIBUTE_LINE.match(line) or _SNIPPET.match(line):
            index += 1
            continue
        stripped = strip_shortcodes(line)
        if stripped.strip() or not line.strip():
            out.append(stripped)
        else:
            out.append("")  # a line that held only tags: a paragraph break, so labels stand apart
        index += 1
    return out


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the line that closes the fence opened at ``start`` (the last line when it is never closed)."""
    closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for index in range(start + 1, len(lines)):
        if closing.match(lines[index]):
            return index
    return len(lines) - 1


# --- HTML --------------------------------------------------------------------------------------------------------
_BADGE_HOSTS = ("shields.io", "badgen.net", "badge.fury.io", "travis-ci", "circleci.com", "codecov.io", "/badge")
_TRACKING = ("pixel", "analytics", "track", "beacon", "scarf.sh", "matomo", "/collect?")


def keeps_image(src: str, width: str = "", height: str = "") -> bool:
    """False for tracking pixels (1x1, or served by an analytics endpoint) and status badges."""
    lowered = src.lower()
    if width.strip().rstrip("px") in ("0", "1") or height.strip().rstrip("px") in ("0", "1"):
        return False
    return not any(marker in lowered for marker in (*_BADGE_HOSTS, *_TRACKING))


def image_text(alt: str, src: str, width: str = "", height: str = "") -> str:
    return alt.strip() if keeps_image(src, width, height) else ""


_SKIPPED_ELEMENTS = frozenset({"script", "style", "iframe", "svg", "noscript", "template"})
_BLOCK_ELEMENTS = frozenset(
    {"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "summary", "details", "table", "ul", "ol"}
)


class _TextOfHTML(HTMLParser):
    """Streams an HTML fragment into text (the standard library's parser: linear, and it never builds a tree, so
    100,000 nested ``<div>`` cost what their bytes cost)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_ELEMENTS:
            self.skipping += 1
            return
        values = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.parts.append(
                image_text(
                    values.get("alt", ""), values.get("src", ""), values.get("width", ""), values.get("height", "")
                )
            )
        elif tag in _LABELLED and (label := values.get("label") or values.get("title")):
            self.parts.append(f"\n{_label_line(label)}\n")
        if tag in _BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _SKIPPED_ELEMENTS:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_ELEMENTS:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_text(fragment: str) -> str:
    """The text of an HTML (or MDX/JSX) fragment: tags dropped, alt text of kept images and labels of tab items
    kept, scripts, styles and comments dropped. Block elements and ``<br>`` end lines."""
    if "<" not in fragment:
        return fragment
    reader = _TextOfHTML()
    reader.feed(fragment)
    reader.close()
    text = "".join(reader.parts)
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", text)).strip()


# HTML written as text (``&lt;br&gt;`` in generated reference tables): markup the generator failed to render
_ESCAPED_TAG = re.compile(
    r"</?(?:br|pre|p|code|b|i|em|strong|ul|ol|li|div|span|sup|sub|table|tr|td|th|hr)(?:\s[^<>]*)?/?>", re.IGNORECASE
)


def drop_escaped_tags(text: str) -> str:
    """Text with HTML element tags that arrived as literal text (escaped in the source) replaced by a space."""
    return _ESCAPED_TAG.sub(" ", text) if "<" in text else text


def strip_inline_html(fragment: str) -> str:
    """An inline HTML tag as text: nothing for a tag (``<a id=...>``, ``</span>``), the alt text for an image."""
    if fragment.lstrip().lower().startswith("<img"):
        return html_text(fragment)
    return ""
