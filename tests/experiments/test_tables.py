"""What the experiments report: tables also land in Markdown beside the JSON, and the IBP
toy pairs true and inferred features one to one."""

from __future__ import annotations

import itertools

import numpy as np

from bayeskit.experiments import common, ibp_toy


def test_tables_and_notes_inside_the_context_are_written_as_markdown(tmp_path, capsys):
    path = tmp_path / "exp.md"
    common.print_table("outside", ["a"], [[1]])
    with common.markdown_tables(path):
        common.print_table("\nFirst table", ["method", "loss"], [["x | y", 0.25], ["z", None]])
        assert path.read_text().count("|---|---|") == 1  # written after each table
        common.print_note("A finding\nover two lines.")
        common.print_table("Second", ["k"], [[3]], paper="curves only")
    common.print_table("after", ["b"], [[2]])
    text = path.read_text()
    assert "outside" not in text and "after" not in text
    assert text.index("**First table**") < text.index("A finding over two lines.") < text.index("**Second**")
    assert "| method | loss |" in text and "| x \\| y | 0.2500 |" in text and "| z | - |" in text
    assert text.rstrip().endswith("| 3 |\n\npaper: curves only")
    assert "A finding" in capsys.readouterr().out


def test_ibp_features_are_matched_one_to_one_at_least_total_error():
    rng = np.random.default_rng(0)
    truth = rng.random((4, 36))
    for n_inferred in (6, 4, 2):
        features = rng.random((n_inferred, 36))
        features[:2] = truth[[0, 0]] + 0.01 * rng.standard_normal((2, 36))  # two near copies of true 1
        matches = ibp_toy._match(features, truth)
        err = np.sqrt(((features[None] - truth[:, None]) ** 2).mean(-1))
        best = min(sum(err[i, j] for i, j in zip(rows, perm))
                   for rows in itertools.combinations(range(4), min(4, n_inferred))
                   for perm in itertools.permutations(range(n_inferred), min(4, n_inferred)))
        used = [j for j, _ in matches if j >= 0]
        assert len(used) == len(set(used)) == min(4, n_inferred)
        assert np.isclose(sum(e for j, e in matches if j >= 0), best)
        order = ibp_toy._matched_order(matches, n_inferred)
        assert sorted(order) == list(range(n_inferred)) and order[: len(used)] == used
