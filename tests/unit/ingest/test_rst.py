"""Sphinx reStructuredText pages: titles make the heading path, directives and roles are unwrapped (the text stays,
the markup goes), code stays with its lead-in, tables keep their header, docutils' messages never reach the text.

Snippets are short quotes from celery/celery docs/ (CC BY-SA 4.0, Ask Solem & contributors), some trimmed.
"""

from __future__ import annotations

import pytest
from docutils.parsers.rst import directives, roles

from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.parsers import SUPPORTED_SUFFIXES, parse_file
from anaphora.ingest.rst import looks_like_rst, parse_rst

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    return len(text.split())


def chunk_texts(source: str, size: int = 200) -> list[str]:
    return [c.text for c in chunk_sections(parse_rst(source), size=size, overlap=0, count=words)]


def blocks_of(source: str) -> list[tuple[str, str]]:
    return [(b.kind, b.text) for s in parse_rst(source) for b in s.blocks]


CONFIGURATION = """\
.. _configuration:

============================
 Configuration and defaults
============================

This document describes the configuration options available.

.. contents::
    :local:
    :depth: 2

.. _conf-worker:

Worker
------

.. setting:: worker_prefetch_multiplier

``worker_prefetch_multiplier``
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~

Default: 4.

How many messages to prefetch at a time multiplied by the number of
concurrent processes. See :ref:`conf-worker` and :setting:`worker_disable_prefetch`.

.. note::

    This feature is currently only supported when using Redis as the broker.

.. setting:: worker_eta_task_limit

``worker_eta_task_limit``
~~~~~~~~~~~~~~~~~~~~~~~~~

.. versionadded:: 5.6

Default: No limit (None).

The maximum number of ETA/countdown tasks that a worker can hold in memory at once.
"""


def test_titles_make_the_heading_path_and_directives_leave_their_text():
    sections = parse_rst(CONFIGURATION)
    headings = [s.headings for s in sections]
    assert headings[0] == ["Configuration and defaults"]
    assert ["Configuration and defaults", "Worker", "`worker_prefetch_multiplier`"] in headings
    prefetch = next(s for s in sections if s.headings[-1] == "`worker_prefetch_multiplier`")
    assert "This feature is currently only supported when using Redis as the broker." in prefetch.text
    # :ref: shows the title of the section it names; :setting: is a code span, as Sphinx renders it monospace
    assert "See Worker and `worker_disable_prefetch`." in prefetch.text
    eta = next(s for s in sections if s.headings[-1] == "`worker_eta_task_limit`")
    assert eta.text.startswith("New in version 5.6.")
    everything = "\n".join(s.text for s in sections)
    for markup in (".. ", "::", ":ref:", ":setting:", "contents", "local", "depth"):
        assert markup not in everything


def test_version_notes_keep_their_text_after_the_version():
    page = ".. versionchanged:: 5.5\n\n    Soft shutdown now waits for the timeout.\n\n.. deprecated:: 6.0 Use X.\n"
    assert blocks_of(page) == [
        ("text", "Changed in version 5.5: Soft shutdown now waits for the timeout."),
        ("text", "Deprecated since version 6.0: Use X."),
    ]


def test_code_stays_with_its_lead_in_and_keeps_its_language_and_caption():
    page = """\
First steps
===========

Install it with pip:

.. code-block:: console
    :emphasize-lines: 1
    :caption: shell

    $ pip install celery

Literal blocks work too::

    >>> add.delay(4, 4)
"""
    kinds = blocks_of(page)
    assert kinds[0] == ("text", "Install it with pip:")
    assert kinds[1] == ("label", "shell:")
    assert kinds[2] == ("code", "```console\n$ pip install celery\n```")
    assert kinds[3] == ("text", "Literal blocks work too:")
    assert kinds[4][0] == "code" and ">>> add.delay(4, 4)" in kinds[4][1]
    chunks = chunk_texts(page + "\n" + "Filler sentence here. " * 40, size=60)
    assert any("Install it with pip:" in c and "$ pip install celery" in c for c in chunks)


def test_a_captions_markup_goes_as_in_prose():
    """Flask's docs caption their code with the file it goes in (``:caption: ``flaskr/__init__.py````): the caption
    was kept as written, double backquotes and all, and said back in a recap."""
    page = ".. code-block:: python\n    :caption: ``flaskr/__init__.py``\n\n    def create_app():\n        return app\n"
    assert blocks_of(page)[0] == ("label", "`flaskr/__init__.py`:")


GRID = """\
+-----------------------------------------+--------------------------------------------+
| **Example**                             | **Meaning**                                |
+=========================================+============================================+
| ``crontab()``                           | Execute every minute.                      |
+-----------------------------------------+--------------------------------------------+
| ``crontab(minute=0, hour=0)``           | Execute daily at midnight.                 |
+-----------------------------------------+--------------------------------------------+
"""

LIST_TABLE = """\
.. list-table:: Brokers
   :header-rows: 1

   * - Name
     - Status
   * - *RabbitMQ*
     - Stable
   * - *Redis*
     - Stable
"""


@pytest.mark.parametrize("page", [GRID, LIST_TABLE], ids=["grid", "list-table"])
def test_grid_and_list_tables_keep_their_header(page):
    tables = [s for s in parse_rst(page) for b in s.blocks if b.kind == "table"]
    assert len(tables) == 1
    table = next(b for b in tables[0].blocks if b.kind == "table")
    assert table.head.splitlines()[0] in ("| Example | Meaning |", "| Name | Status |")
    assert len(table.parts) == 2
    # a chunk of rows only (a small chunk size) still starts with the header row
    for chunk in chunk_texts(page, size=16):
        if "Stable" in chunk or "Execute" in chunk:
            assert chunk.startswith(("| Example |", "| Name |", "Brokers:"))


def test_unknown_directives_and_roles_are_unwrapped_and_never_fatal():
    page = """\
Workers
=======

.. control:: pool_grow

.. tabs::

   .. tab:: Redis

      Use :pypi:`redis` with :program:`celery worker` and send :sig:`TERM`
      (:github_issue:`9181`, :class:`~celery.app.task.Task`, :meth:`~@Task.retry`).

.. hlist::
   :columns: 2

   * prefork
   * eventlet

.. toctree::
    :maxdepth: 1

    first-steps-with-celery
    next-steps

.. autoclass:: celery.app.task.Task

.. some-extension-nobody-knows:: argument
   :odd-option: yes

   Its content is still text.
"""
    text = "\n".join(s.text for s in parse_rst(page))
    assert "Use redis with `celery worker` and send `TERM` (#9181, `Task`, `retry`)." in text
    assert "Redis:" in text  # a tab's title is a label
    assert "- prefork\n- eventlet" in text
    assert "Its content is still text." in text
    for gone in ("toctree", "first-steps-with-celery", "pool_grow", "autoclass", "celery.app.task", ".. ", ":`"):
        assert gone not in text


def test_an_object_description_is_its_signature_as_a_label_above_its_text():
    """``.. attribute:: Task.max_retries`` renders its signature as a label line above its description: the line
    the extractive answerer reads as the term the paragraph describes (a label shaped as a code name). Rendering it
    as a code span instead re-chunked the Celery corpus and lost two tune turns (bench/HISTORY.md, session 27)."""
    page = """\
Retrying
========

.. attribute:: Task.max_retries

    A number. Maximum number of retries before giving up.

.. tab:: Redis

    Use redis.
"""
    text = "\n".join(s.text for s in parse_rst(page))
    assert "Task.max_retries:\n\nA number. Maximum number of retries before giving up." in text
    assert "Redis:\n\nUse redis." in text


def test_a_projects_own_code_directive_stays_code():
    """Click's docs show their samples with ``click:example`` and ``click:run``, directives of their own theme: read
    as body text, the code became sentences ("invoke(repeat, args=['--count=100'])" quoted as prose). Content that
    is Python with code in it, or a shell session, stays a code block; prose in an unknown directive stays prose."""
    page = """\
Options
=======

To give an option a default:

.. sample:example::

    @click.command()
    @click.option('--n', default=1)
    def dots(n):
        click.echo('.' * n)

.. sample:run::

    invoke(dots, args=['--n=2'])

.. sample:session::

    $ dots --n=2

.. sample:aside::

    Options are optional.
"""
    text = "\n".join(s.text for s in parse_rst(page))
    assert "To give an option a default:\n\n```python\n@click.command()\n@click.option('--n', default=1)" in text
    assert "```python\ninvoke(dots, args=['--n=2'])\n```" in text
    assert "```console\n$ dots --n=2\n```" in text
    assert "Options are optional." in text and "```\nOptions" not in text


def test_system_messages_never_reach_the_text():
    page = "Title\n=====\n\nA *broken emphasis and an `unclosed role.\n\n.. note::\n\n.. image::\n\nLast words.\n"
    text = "\n".join(s.text for s in parse_rst(page))
    assert "Last words." in text
    for message in ("ERROR", "WARNING", "start-string", "Inline", "directive", "System Message"):
        assert message not in text


def test_role_markup_docutils_left_as_text_is_unwrapped():
    """Inline markup does not nest: "**:github_user:`na387`**" is bold text to docutils, and
    ":setting:``NAME``" a bare role name before a literal."""
    page = "Contributed by **:github_user:`na387`**. New setting :setting:``CELERYBEAT_SYNC_EVERY``.\n"
    assert blocks_of(page) == [("text", "Contributed by @na387. New setting `CELERYBEAT_SYNC_EVERY`.")]


def test_no_file_is_read_and_the_docutils_registries_are_restored(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    page = f".. include:: {secret}\n\n.. literalinclude:: {secret}\n\n.. raw:: html\n   :file: {secret}\n\nText.\n"
    before_directives, before_roles = dict(directives._directives), dict(roles._roles)
    assert "\n".join(s.text for s in parse_rst(page + "\n:setting:`x` and .. code-block:: x\n")).count("SECRET") == 0
    assert directives._directives == before_directives
    assert roles._roles == before_roles


def test_rst_files_and_sphinx_text_includes_parse_as_rst(tmp_path):
    assert ".rst" in SUPPORTED_SUFFIXES
    page = tmp_path / "intro.rst"
    page.write_text("Intro\n=====\n\nSee :ref:`first-steps`.\n", encoding="utf-8")
    assert parse_file(page).sections[0].text == "See first steps."
    include = tmp_path / "introduction.txt"  # Sphinx trees include .txt pages (Django's docs are all .txt)
    include.write_text("Celery is a :term:`task queue`.\n\n.. note::\n\n   It is simple.\n", encoding="utf-8")
    assert [s.text for s in parse_file(include).sections] == ["Celery is a task queue.\n\nIt is simple."]
    plain = tmp_path / "notes.txt"
    plain.write_text("Just a note: see the manual.\n", encoding="utf-8")
    assert parse_file(plain).sections[0].text == "Just a note: see the manual."
    assert not looks_like_rst("a sentence with a colon: and a time 10:30.")


def test_a_line_past_the_limit_is_refused_by_name():
    from anaphora.errors import InputError

    with pytest.raises(InputError, match="longer than 10,000 characters"):
        parse_rst("x" * 10_001, "huge.rst")
