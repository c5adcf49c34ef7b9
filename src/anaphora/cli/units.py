"""The second phase of ``anaphora ingest``: the answer units (:mod:`anaphora.ingest.units`), and ``anaphora units``.

After the passages are written they are searchable, so ``ingest`` says so and, by default, leaves the units to a
process of its own at low priority and returns: the user can ask at once (a first answer embeds the units it needs
meanwhile). ``--answer-units wait`` embeds them in the ingest process instead, with progress; ``later`` leaves them
to the next ``anaphora units``, ``ingest`` or ``serve``. Whatever stops a run, the next one resumes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from anaphora.app import Anaphora
from anaphora.cli.progress import IngestProgress
from anaphora.cli.render import shown, terminal
from anaphora.ingest.units import UnitsReport
from anaphora.settings import Settings, load_settings

BACKGROUND_NICENESS = 10  # the background process yields the cores to the user's questions
LOG_NAME = "answer-units.log"

# the global options of `anaphora` as ``ctx.obj`` keeps them, and how they are spelled on the command line
_GLOBAL_OPTIONS = {"data_dir": "--data-dir", "config_file": "--config", "chat_model": "--chat-model"}


class UnitsMode(StrEnum):
    background = "background"
    wait = "wait"
    later = "later"


def child_arguments(options: dict[str, Any], data_dir: Path) -> list[str]:
    """The ``anaphora`` global options that give a child process the settings of this one (``options``: the
    callback's ``ctx.obj``), with the data dir resolved."""
    arguments = ["--data-dir", str(data_dir)]
    for name, value in options.items():
        if value is None or name == "data_dir":
            continue
        if name in _GLOBAL_OPTIONS:
            arguments += [_GLOBAL_OPTIONS[name], str(value)]
        elif name == "embedder":
            arguments += ["--embedder", str(value)]
        else:
            arguments += ["--set", f"{name}={value}"]
    return arguments


def start_in_background(options: dict[str, Any], data_dir: Path) -> int:
    """Start ``anaphora units --background`` detached from this terminal (its own session, output to a log in the
    data dir); returns its pid."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / LOG_NAME).open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "anaphora", *child_arguments(options, data_dir), "units", "--background"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return child.pid


def embed_with_progress(rag: Anaphora, errors: Console, every_s: float) -> UnitsReport | None:
    """Run the units phase here, with a bar or progress lines; Ctrl-C stops it between steps' writes (kept)."""
    with IngestProgress(errors, every_s=every_s, label="answer units") as progress:
        return rag.embed_answer_units(progress=progress.units)


def describe(report: UnitsReport) -> str:
    if report.busy:
        return "Answer units: another process is embedding them for this data dir."
    state = "all embedded" if report.finished else "not finished (run anaphora units to go on)"
    return (
        f"Answer units: {state}; {report.embedded:,} embedded now of {report.units:,} "
        f"in {report.passages:,} passages ({report.seconds:.1f}s)."
    )


def after_ingest(
    console: Console, errors: Console, rag: Anaphora, mode: UnitsMode, options: dict[str, Any], every_s: float
) -> None:
    """Say the index is searchable, then deal with the units as ``mode`` says."""
    units = rag.components.answer_units
    passages = sum(d.chunk_count for d in rag.components.corpus.documents())
    if not passages:
        return
    console.print(f'[bold]Searchable now[/bold]: {passages:,} passages. Ask with anaphora ask "..." or anaphora chat.')
    if units is None or not units.pending():
        return
    if mode is UnitsMode.wait:
        try:
            report = embed_with_progress(rag, errors, every_s)
        except KeyboardInterrupt:
            console.print("Answer units: stopped; what was embedded is kept, anaphora units (or ingest) goes on.")
            raise typer.Exit(130) from None
        if report is not None:
            console.print(describe(report))
    elif mode is UnitsMode.background:
        pid = start_in_background(options, rag.settings.data_dir)
        console.print(
            f"Answer units (the sentences, code blocks and table rows a quoted answer judges): embedding in the "
            f"background (pid {pid}, log {shown(str(rag.settings.data_dir / LOG_NAME))}); until then an answer "
            "embeds the ones "
            "it needs. If stopped, the next anaphora ingest, units or serve resumes them."
        )
    else:
        console.print("Answer units: not embedded yet (anaphora units embeds them; answers embed what they need).")


def background_settings(settings: Settings) -> Settings:
    """The settings of the background run: its embedder's threads do not spin-wait between operators, since a
    spinning thread takes a core even at low priority and the user's first question, asked meanwhile, would wait
    for it (spinning changes how threads wait, not the vectors)."""
    return settings.with_updates(embedder_spin_wait=False)


def units(
    ctx: typer.Context,
    background: Annotated[
        bool, typer.Option("--background", help="run at low priority and print only the summary (ingest's child)")
    ] = False,
    progress_every: Annotated[
        float, typer.Option(help="seconds between progress lines when stderr is not a terminal")
    ] = 5.0,
) -> None:
    """Embed the answer units of the ingested passages that are not embedded yet (ingest starts this in the
    background; stopping it is safe, running it again resumes)."""
    settings = load_settings(**ctx.obj)
    if background:
        os.nice(BACKGROUND_NICENESS)
        settings = background_settings(settings)
    console, errors = terminal(), terminal(stderr=True)
    with Anaphora(settings) as rag:
        if rag.components.answer_units is None:
            console.print("Answer units: none to embed ahead with these settings (answers are not quoted).")
            return
        report = rag.embed_answer_units() if background else embed_with_progress(rag, errors, progress_every)
        assert report is not None
        console.print(describe(report))
