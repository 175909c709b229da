"""The scaling table: every configuration of the matrix is a row with its figures."""

from __future__ import annotations

from amber.tools._bench_scaling import MATRIX, format_scaling


def test_the_matrix_covers_workers_starters_length_and_the_report_paths() -> None:
    assert {workers for _, workers, _, _, _ in MATRIX} == {1, 2, 4}
    assert {w for _, _, w, _, _ in MATRIX} == {1, 16, 64}
    assert {k for _, _, _, k, _ in MATRIX} == {5, 20}
    assert {options for *_, options in MATRIX} == {(), ("--streams", "1"), ("--unary",)}


def test_each_row_shows_its_figures() -> None:
    cpu = {"total": 17.5, "server": 6.6, "workers": 5.5, "postgres": 5.4}
    row = {
        "label": "1 worker, W=16, K=5",
        "workflows_per_s": 68.7,
        "cpu_ms_per_workflow": cpu,
        "db_commits_per_workflow": 6.1,
        "items_per_batch": 3.9,
    }
    unary = row | {"label": "1 worker, W=16, K=5, unary reports", "items_per_batch": None}
    table = format_scaling({"n": 400, "rows": [row, unary]})
    lines = table.splitlines()
    assert lines[0] == "scaling, N=400 per configuration"
    assert lines[3].startswith("1 worker, W=16, K=5 ")
    assert lines[3].split()[-7:] == ["68.7", "17.5", "6.6", "5.5", "5.4", "6.10", "3.90"]
    assert lines[4].endswith("-")  # no stream: no batches
