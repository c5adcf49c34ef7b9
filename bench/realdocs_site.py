"""realdocs-dev answered from a crawled copy of a corpus's site against the same corpus ingested from its Markdown,
on the same conversations (issue 48).

    python bench/realdocs_site.py [--corpus semaphore-ce] [--model embedded] [--limit N] [--name realdocs-site]
                                  [--keep DIR]

The site is :mod:`anaphora.testing.static_site`'s copy of the corpus (each page rendered by markdown-it, a Sphinx
tree's reStructuredText by docutils, into a template with a header, navigation and footer; a sitemap), served on
127.0.0.1 and ingested with ``Sources.site`` (sitemap, robots.txt, main-text extraction), with ``crawl_delay_s = 0``
(a local server). The Markdown side is ``Ingestor.run`` on the same files (for celery, its ``.rst`` pages). Both then
answer every conversation of the corpus with the same settings (realdocs.py's ``run_conversation`` and scoring).
Reported: each side's scores, the share of scored turns whose key-fact recall is within 0.05 of the Markdown side's,
and ingest time (crawl + index for the site). Gold citation hits are not comparable (a crawled page is named by its
URL path, gold by its file) and are left out.

``--keep DIR`` keeps the Markdown side's index in ``DIR`` between runs (the crawled side is built anew each time):
a second run re-ingests no unchanged file, so comparing a change to the crawl costs the crawl and the answers only.
Its Markdown ingest time is then that check's, and the result says ``"markdown_index_reused": true``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import threading
import time
from datetime import date
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

from common import git_revision, machine, write_result
from realdocs import aggregate, corpus_files, data_root, run_conversation

from anaphora import Settings
from anaphora.app import aclose_components, build_components, close_local, sources_of
from anaphora.ingest.urls import SiteRules, detect_generator, folder_page
from anaphora.testing.static_site import StaticHost, build_site

TOLERANCE = 0.05


async def answer(settings: Settings, conversations: list[dict], ingest) -> tuple[list[dict], dict]:
    """Build the components, ``ingest`` into them (timed), answer the conversations."""
    components = build_components(settings)
    try:
        started = time.perf_counter()
        report = await asyncio.to_thread(ingest, components)
        stats = {
            "seconds": round(time.perf_counter() - started, 1),
            "documents": len(report.added) + len(report.updated),
            "skipped": len(report.skipped),
            "chunks": report.chunks_written,
        }
        rows = []
        for conversation in conversations:
            rows.extend(await run_conversation(components, conversation))
        return rows, stats
    finally:
        await aclose_components(components)
        close_local(components)


def compare(markdown: list[dict], site: list[dict]) -> dict:
    pairs = [
        (m["recall"], s["recall"])
        for m, s in zip(markdown, site, strict=True)
        if m.get("recall") is not None and s.get("recall") is not None
    ]
    within = sum(1 for a, b in pairs if abs(a - b) <= TOLERANCE)
    return {"turns": len(pairs), "within_0_05": within, "share_within_0_05": round(within / len(pairs), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="semaphore-ce")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--limit", type=int, default=None, help="conversations")
    parser.add_argument("--name", default="realdocs-site")
    parser.add_argument("--keep", type=Path, default=None, help="keep the Markdown side's index here between runs")
    args = parser.parse_args()
    data = data_root()
    conversations = [json.loads(line) for line in (data / "conversations.jsonl").read_text().splitlines() if line]
    chosen = [c for c in conversations if c["corpus"] == args.corpus][: args.limit]
    tree = data / args.corpus
    generator = detect_generator(tree)
    started = time.time()
    reused = args.keep is not None and (args.keep / "md").is_dir()
    with tempfile.TemporaryDirectory(prefix="anaphora-site-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        for fresh in ("site", "crawl", "docs"):
            shutil.rmtree(work / fresh, ignore_errors=True)
        (work / "site").mkdir(parents=True)
        pages = (".md", ".rst") if generator == "sphinx" else (".md",)  # a Sphinx tree's .txt files are includes
        files = [f for f in corpus_files(tree) if f.suffix in pages]
        docs = work / "docs"
        for file in files:  # the corpus's pages without SOURCE.md, as realdocs.py ingests them
            target = docs / file.relative_to(tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(file.read_bytes())
        host = ThreadingHTTPServer(("127.0.0.1", 0), partial(StaticHost, directory=str(work / "site")))
        threading.Thread(target=host.serve_forever, daemon=True).start()
        local = f"http://127.0.0.1:{host.server_address[1]}"
        try:
            rules = SiteRules(local + "/", generator)
            links = {f: folder_page(docs, f, rules) for f in sorted(docs.rglob("*")) if f.suffix in pages}
            build_site(links, rules.base_url, generator, work / "site")
            base = Settings(chat_model=args.model, crawl_delay_s=0)
            md_rows, md_stats = asyncio.run(
                answer(base.with_updates(data_dir=work / "md"), chosen, lambda c: c.ingestor.run([docs]))
            )
            site_rows, site_stats = asyncio.run(
                answer(base.with_updates(data_dir=work / "crawl"), chosen, lambda c: sources_of(c).site(local + "/"))
            )
        finally:
            host.shutdown()
            host.server_close()
    payload = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "revision": git_revision(),
        "command": f"python bench/realdocs_site.py --corpus {args.corpus} --model {args.model}"
        + (f" --limit {args.limit}" if args.limit else ""),
        "seconds": round(time.time() - started),
        "generator": generator,
        "embed_answer_units": Settings(chat_model=args.model).ingest.embed_answer_units,  # ANAPHORA_EMBED_...
        "conversations": len(chosen),
        "markdown_index_reused": reused,
        "ingest": {"markdown": md_stats, "site": site_stats},
        "scores": {"markdown": aggregate(md_rows), "site": aggregate(site_rows)},
        "recall_within_0_05": compare(md_rows, site_rows),
    }
    path = write_result(args.name, payload)
    for side in ("markdown", "site"):
        scores = payload["scores"][side]
        print(
            f"{side:9} ingest {payload['ingest'][side]}  recall {scores['recall']['value']}  "
            f"answered {scores['answered']['value']}"
        )
    print(f"recall within {TOLERANCE}: {payload['recall_within_0_05']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
