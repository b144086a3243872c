"""The results explorer: one self-contained HTML file per report (``bias-harness report RUN... --html``,
``bias-harness compare A B --html``, the results page's replay), with every number one click from the documents
behind it. docs/explorer.md describes it.

Modules: ``documents`` (what a document row holds; the helpers the works' modules use), ``build`` (a run's numbers,
verdicts, diagnostics and packed documents), ``svg`` (the figures), ``page`` (``write_explorer``) and ``compare``
(``write_compare_explorer``); the page's script and styles are ``assets/`` (Preact and htm vendored
in ``assets/vendor/``).

A work takes part with ``plugins/<work>/explore.py`` (found by :mod:`bias_harness.works`, as ``report.py`` is)::

    def matches(task: str) -> bool: ...
    def rows(run: Run, task: str, samples: list[dict]) -> list[Row]
        # one Row per logged sample, in the samples' order: subgroup fields, the prompt or the dialogue's turns,
        # each answer with the parser rule that read it, its reading and validity (documents.Row, Answer, Turn)
    def diagnostics(run, task, samples, rows, results) -> list[Diagnostic]  # optional: each answer-validity diagnostic
        # with exactly the answers it counts, from the metric's own per-document items (documents.share)
    def scope(task: str, metric: str) -> dict[str, str] | None        # optional: the field filter of the documents
        # behind a headline number (e.g. a score per relationship type: {"relationship": "woman_man"})
    def paper_range(task, metric) -> tuple[float, float, str] | None  # optional: the paper's range of the number

A task no work claims gets :func:`documents.generic_rows` (prompt and answer, no parser rule).
"""
