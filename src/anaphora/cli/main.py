"""The ``anaphora`` command. Errors from the library become a message and a fix here, and nowhere else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from anaphora.app import Anaphora
from anaphora.cli.eval import eval_app
from anaphora.cli.feedback import feedback, report
from anaphora.cli.memory import memory_app
from anaphora.cli.progress import DEFAULT_EVERY_S, IngestProgress
from anaphora.cli.render import (
    inert,
    print_ingest_report,
    print_memories,
    print_sources,
    print_trace,
    shown,
    terminal,
)
from anaphora.cli.sites import ingest_sites, print_sources_table, sync_sources
from anaphora.cli.units import UnitsMode, after_ingest, units
from anaphora.errors import (
    AnaphoraError,
    ConversationNotFoundError,
    InputError,
    MemoryNotFoundError,
    TurnNotFoundError,
    require,
)
from anaphora.ingest.sources import is_site
from anaphora.settings import load_settings
from anaphora.turn_ids import response_id
from anaphora.types import TurnResult

app = typer.Typer(
    help="Conversational RAG where follow-up questions work.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
conversations_app = typer.Typer(help="List, show and delete stored conversations.", no_args_is_help=True)
app.add_typer(conversations_app, name="conversations")
app.add_typer(eval_app, name="eval")
app.add_typer(memory_app, name="memory")
app.command()(feedback)
app.command()(report)
app.command()(units)
console = terminal()
errors = terminal(stderr=True)

TraceOption = Annotated[bool, typer.Option("--trace", help="print the per-turn trace")]
ConversationOption = Annotated[str | None, typer.Option("--conversation", "-c", help="conversation id to continue")]
ContinueOption = Annotated[
    str | None,
    typer.Option(
        "--continue",
        help="a response id (resp_...) whose chain to continue; an earlier response of a chain starts a branch",
    ),
]
TemporaryOption = Annotated[
    bool, typer.Option("--temporary", help="a temporary chat: recall no long-term memory and leave none")
]


@app.callback()
def configure(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None, typer.Option(help="where the store and indexes live (env: ANAPHORA_DATA_DIR)")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="TOML settings file (env: ANAPHORA_CONFIG_FILE)")] = None,
    chat_model: Annotated[
        str | None,
        typer.Option(
            help="embedded | gguf:PATH | openai:MODEL | anthropic:MODEL | fake, or a plugin's scheme "
            "(env: ANAPHORA_CHAT_MODEL)"
        ),
    ] = None,
    embedder: Annotated[
        str | None, typer.Option(help="minilm | sentence-transformers:PATH | hashing (env: ANAPHORA_EMBEDDER)")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="any setting, as NAME=VALUE (repeatable)")] = None,
) -> None:
    """Global options override ANAPHORA_* variables, which override the TOML file."""
    overrides = {}
    for item in set_ or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--set expects NAME=VALUE, got {item!r}", hint="e.g. --set fusion=bm25")
        overrides[name.strip().replace("-", "_")] = value
    ctx.obj = dict(overrides, data_dir=data_dir, config_file=config, chat_model=chat_model, embedder=embedder)


def _open(ctx: typer.Context) -> Anaphora:
    return Anaphora(load_settings(**ctx.obj))


def _ingest(
    rag: Anaphora,
    paths: list[Path],
    *,
    prune: bool = True,
    force: bool = False,
    verbose: bool = False,
    every_s: float = DEFAULT_EVERY_S,
    workers: int = 1,
    **published,
):
    """``published``: base_url, generator, directory_urls (anaphora.app.Anaphora.ingest)."""
    with IngestProgress(errors, every_s=every_s) as progress:
        report = rag.ingest(
            paths,
            prune=prune,
            force=force,
            progress=progress.chunks,
            reading=progress.files,
            workers=workers,
            notice=progress.notice,
            **published,
        )
    print_ingest_report(console, report, verbose=verbose)
    return report


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(help="files or folders (.md .rst .txt .html .pdf .jsonl), or a site's URL to crawl"),
    ],
    prune: Annotated[bool, typer.Option(help="remove documents whose files left an ingested folder")] = True,
    rebuild: Annotated[bool, typer.Option(help="re-chunk and re-embed unchanged files too")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="name every skipped file (the summary groups them by reason)")
    ] = False,
    progress_every: Annotated[
        float,
        typer.Option(help="seconds between progress lines when stderr is not a terminal (a terminal gets a bar)"),
    ] = DEFAULT_EVERY_S,
    workers: Annotated[
        int, typer.Option(min=1, help="embedding processes, each with its own embedder threads (more cores)")
    ] = 1,
    base_url: Annotated[
        str | None, typer.Option(help="where the folders are published: citations open the page at the heading")
    ] = None,
    generator: Annotated[
        str | None, typer.Option(help="the site generator (docusaurus mkdocs hugo gitbook sphinx vitepress plain)")
    ] = None,
    directory_urls: Annotated[
        bool | None, typer.Option(help="pages served as folder/ (MkDocs use_directory_urls, VitePress clean URLs)")
    ] = None,
    allow_mass_delete: Annotated[
        bool, typer.Option(help="let a site's re-sync remove more than sync_max_delete_share of its pages")
    ] = False,
    answer_units: Annotated[
        UnitsMode,
        typer.Option(
            help="the passages' answer units, embedded once the passages are searchable: in a background process "
            "(ingest returns), here (wait), or later (anaphora units)"
        ),
    ] = UnitsMode.background,
) -> None:
    """Index documents, or crawl a site from its URL. Unchanged files and pages are skipped, changed ones
    replaced, deleted ones removed. The passages are searchable when it says so; their answer units follow."""
    urls = [p for p in paths if is_site(p)]
    files = [Path(p) for p in paths if not is_site(p)]
    with _open(ctx) as rag:
        if files:
            _ingest(
                rag,
                files,
                prune=prune,
                force=rebuild,
                verbose=verbose,
                every_s=progress_every,
                workers=workers,
                base_url=base_url,
                generator=generator,
                directory_urls=directory_urls,
            )
        ingest_sites(console, rag, urls, allow_mass_delete=allow_mass_delete, force=rebuild, verbose=verbose)
        after_ingest(console, errors, rag, answer_units, ctx.obj, progress_every)


@app.command()
def sync(
    ctx: typer.Context,
    allow_mass_delete: Annotated[
        bool, typer.Option(help="let a site's re-sync remove more than sync_max_delete_share of its pages")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="name every page skipped or kept")] = False,
) -> None:
    """Bring every ingested folder and site up to date (a site fetches only what changed)."""
    with _open(ctx) as rag:
        sync_sources(console, rag, allow_mass_delete=allow_mass_delete, verbose=verbose)
        after_ingest(console, errors, rag, UnitsMode.background, ctx.obj, DEFAULT_EVERY_S)


@app.command()
def sources(ctx: typer.Context) -> None:
    """List the ingested folders and sites with their published URL and last sync."""
    with _open(ctx) as rag:
        print_sources_table(console, rag)


def _answer(
    rag: Anaphora,
    question: str,
    conversation: str | None,
    trace: bool,
    *,
    memory: bool = True,
    continue_from: str | None = None,
) -> TurnResult:
    result: TurnResult | None = None
    for item in rag.stream(question, conversation, memory=memory, continue_from=continue_from):
        if isinstance(item, TurnResult):
            result = item
        else:
            console.print(inert(item), end="", markup=False, soft_wrap=True)
    console.print()
    assert result is not None
    print_sources(console, result)
    print_memories(console, result)
    if trace:
        print_trace(console, result)
    if result.conversation_id:
        console.print(f"[dim]response {shown(response_id(result.conversation_id, result.turn_index))}[/dim]")
    return result


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="your question")],
    conversation: ConversationOption = None,
    continue_from: ContinueOption = None,
    trace: TraceOption = False,
    temporary: TemporaryOption = False,
    remember: Annotated[
        bool, typer.Option("--remember", help="store this turn in a new conversation, so it is remembered")
    ] = False,
) -> None:
    """Answer one question (continuing a conversation with --conversation, or a response's chain with --continue).
    Without either the turn is not stored, so nothing of it is remembered: --remember starts one."""
    with _open(ctx) as rag:
        if remember and conversation is None and continue_from is None and not temporary:
            conversation = rag.new_conversation(question[:60])
        result = _answer(rag, question, conversation, trace, memory=not temporary, continue_from=continue_from)
        conversation = result.conversation_id or None
        remembers = rag.components.settings.memory.enabled and not temporary
    if conversation is None and remembers:
        console.print(
            "[dim]Not remembered: a question without a conversation is not stored. To keep it: "
            "anaphora ask --remember QUESTION (or anaphora chat).[/dim]"
        )
    elif conversation is not None and remembers:
        console.print(
            f"[dim]Remembered (conversation {shown(conversation)}; continue with -c {shown(conversation)}, "
            "see what was kept with anaphora memory list).[/dim]"
        )


@app.command()
def chat(
    ctx: typer.Context,
    conversation: ConversationOption = None,
    continue_from: ContinueOption = None,
    trace: TraceOption = False,
    temporary: TemporaryOption = False,
) -> None:
    """Chat in the terminal; the conversation is stored and can be resumed with --conversation. With --continue the
    chat goes on from a stored response: in its conversation when it is the latest, else in a branch, stored with
    the first answer."""
    with _open(ctx) as rag:
        if continue_from is not None and conversation is not None:
            raise InputError("--continue and --conversation cannot be used together", hint="give one of them")
        if continue_from is None:
            conversation = conversation or rag.new_conversation()
            console.print(f"[dim]conversation {shown(conversation)} — /quit or Ctrl-D to leave[/dim]")
        else:
            rag.chain(continue_from, last=1)  # an unknown response is refused before the first question
            console.print(f"[dim]continuing from response {shown(continue_from)} — /quit or Ctrl-D to leave[/dim]")
        while True:
            try:
                question = console.input("[bold green]you>[/bold green] ").strip()
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            if question in ("/quit", "/exit"):
                break
            if not question:
                continue
            console.print("[bold blue]anaphora>[/bold blue] ", end="")
            try:
                result = _answer(rag, question, conversation, trace, memory=not temporary, continue_from=continue_from)
            except AnaphoraError as exc:
                _report(exc)
                continue
            conversation, continue_from = result.conversation_id, None
        if conversation is not None:
            console.print(f"[dim]resume with: anaphora chat --conversation {shown(conversation)}[/dim]")


@conversations_app.command("list")
def conversations_list(ctx: typer.Context, limit: int = 50) -> None:
    """Stored conversations, most recent first."""
    with _open(ctx) as rag:
        items = rag.conversations(limit=limit)
        for c in items:
            console.print(f"[cyan]{shown(c.id)}[/cyan]  {c.turn_count:>3} turns  {shown(c.title)}")
        if not items:
            console.print("[dim]no conversations yet[/dim]")


@conversations_app.command("show")
def conversations_show(ctx: typer.Context, conversation: str) -> None:
    """Print a conversation's turns with their sources, each under its response id (for --continue)."""
    with _open(ctx) as rag:
        for turn in rag.turns(conversation):
            console.print(f"[dim]{shown(response_id(conversation, turn.index))}[/dim]")
            console.print(f"[bold green]you>[/bold green] {shown(turn.question)}")
            console.print("[bold blue]anaphora>[/bold blue] ", end="")
            console.print(inert(turn.answer), markup=False)
            vote = turn.feedback
            said = (
                "" if vote is None else f" · voted {vote.vote}" + (f' "{shown(vote.comment)}"' if vote.comment else "")
            )
            console.print(f"  [dim]turn {shown(conversation)}:{turn.index}{said}[/dim]")
            for c in turn.citations:
                console.print(inert(f"  [{c.id}] {c.source}"), markup=False)


@conversations_app.command("delete")
def conversations_delete(ctx: typer.Context, conversation: str) -> None:
    """Delete a conversation and all its turns."""
    with _open(ctx) as rag:
        rag.delete_conversation(conversation)
        console.print(f"deleted {shown(conversation)}")


@app.command()
def demo(
    ctx: typer.Context,
    docs: Annotated[Path, typer.Option(help="folder to ingest")] = Path("examples/docs"),
    script: Annotated[Path, typer.Option(help="demo conversation (JSON)")] = Path("examples/demo_conversation.json"),
    trace: TraceOption = False,
) -> None:
    """Ingest the sample corpus and play the scripted multi-turn conversation."""
    from anaphora.cli.demo import load_script

    played = load_script(script)
    with _open(ctx) as rag:
        _ingest(rag, [docs])
        conversations: list[str] = []
        for number, turn in enumerate(played.turns, start=1):
            if not conversations or turn.new_conversation is not None:
                rag.settle()  # what the earlier turns teach is remembered before the next conversation starts
                title = turn.new_conversation or played.title
                conversations.append(rag.new_conversation(title))
                console.rule(f"conversation {shown(conversations[-1])}: {shown(title)}")
            console.rule(f"turn {number}")
            console.print(f"[bold green]you>[/bold green] {shown(turn.user)}")
            console.print("[bold blue]anaphora>[/bold blue] ", end="")
            _answer(rag, turn.user, conversations[-1], trace)
        for conversation in conversations:
            console.print(
                f"[dim]conversation {conversation} stored; continue it with: "
                f"anaphora chat --conversation {conversation}[/dim]"
            )


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option(help="address to listen on (default 127.0.0.1; env ANAPHORA_SERVER_HOST)")
    ] = None,
    port: Annotated[int | None, typer.Option(help="port (default 8000; env ANAPHORA_SERVER_PORT)")] = None,
    force_insecure: Annotated[
        bool, typer.Option("--force-insecure", help="allow auth=none on a non-loopback address")
    ] = False,
    workers: Annotated[
        int,
        typer.Option(min=1, help="processes behind the one port (needs a shared turn lock and session store)"),
    ] = 1,
) -> None:
    """Run the HTTP service: OpenAI-compatible chat completions and a conversations API (docs/server.md)."""
    for module, package in (("fastapi", "fastapi"), ("uvicorn", "uvicorn"), ("jwt", "pyjwt[crypto]")):
        require(module, package=package, extra="server", purpose="anaphora serve")
    from anaphora.server.serve import run, run_workers

    overrides = {**ctx.obj, "server_host": host, "server_port": port}
    settings = load_settings(**overrides)
    if workers > 1:
        run_workers(settings, overrides, workers, force_insecure=force_insecure)
    else:
        run(settings, force_insecure=force_insecure)


CLI_HINTS = {
    ConversationNotFoundError: "list your conversations with: anaphora conversations list",
    MemoryNotFoundError: "list your memories with: anaphora memory list",
    TurnNotFoundError: "see a conversation's turns with: anaphora conversations show CONVERSATION (the first is 0)",
}


def _report(exc: AnaphoraError) -> None:
    errors.print(f"[bold red]error:[/bold red] {shown(exc.message)}", markup=True)
    hint = next((h for kind, h in CLI_HINTS.items() if isinstance(exc, kind)), exc.hint)
    if hint:
        errors.print(f"[bold]fix:[/bold] {shown(hint)}")


def main() -> None:
    try:
        app()
    except AnaphoraError as exc:
        _report(exc)
        sys.exit(1)
