"""``replicates.html``'s body: a repeated session's arms across replicates
(replicates.json), with the clustered intervals, the variance split and power, and
links to each replicate's comparison page."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.clustered import named_tests
from ..analysis.power import power_line
from ..rundocs.compare import (
    ArmScope,
    DifferenceScope,
    ReplicateArm,
    Replicates,
    ReplicateVersus,
    as_replicates,
)
from ._markup import (
    _NONE,
    _ci,
    _e,
    _percent,
)
from .compare import OVERALL
from .comparepage import _p_value, _pp, _pp_interval, _warnings
from .htmlpage import _name_cell, _page


def _replicate_notes(arms: Sequence[ReplicateArm], versus: Sequence[ReplicateVersus]) -> str:
    """Overall: where each arm's variance comes from, and each comparison's power."""
    lines = []
    for arm in arms:
        split = arm.overall.variance
        share = split.seed_share if split is not None else None
        if split is not None and share is not None and split.standard_error:
            lines.append(
                f"{arm.label}: {share:.0%} of the variance comes from the seeds; standard error "
                f"{_pp_plain(split.standard_error)}, with twice the tasks "
                f"{_pp_plain(split.standard_error_twice_the_tasks)}, with twice the replicates "
                f"{_pp_plain(split.standard_error_twice_the_replicates)}"
            )
    lines += [power_line(entry.label, entry.overall.power) for entry in versus if entry.overall.power is not None]
    return "".join(f'<p class="meta power">{_e(line)}</p>' for line in lines)


def _pp_plain(value: object) -> str:
    return "\u2013" if not isinstance(value, int | float) else f"{value * 100:.1f} pp"


def render_replicates(given: Replicates | Mapping[str, Any], figures: str = "") -> str:
    """replicates.html: a repeated session's arms across replicates (replicates.json):
    per stream and overall, each arm's mean over tasks with its clustered interval and
    each replicate's figure, and each later arm's per-task mean difference from the
    baseline with its interval and paired p beside each replicate's McNemar p; the
    variance split and power; links to each replicate's comparison page. ``figures``:
    the forest plot and the learning curves across replicates (:mod:`.replicatefigures`),
    drawn from the replicate runs, shown after the table."""
    document = as_replicates(given)
    versus = {entry.label: entry for entry in document.vs_baseline}
    arms = document.arms
    streams = list(arms[0].streams) if arms else []
    rows = []
    for name in [*streams, OVERALL]:
        for index, arm in enumerate(arms):
            scope = arm.overall if name == OVERALL else arm.streams.get(name) or ArmScope()
            head = _name_cell("th", name, f' rowspan="{len(arms)}"') if index == 0 else ""
            each = " ".join(_percent(value) for value in scope.accuracies)
            against = versus.get(arm.label)
            if against is None:
                cells = (f'<td class="num">baseline</td><td class="num">{_NONE}</td><td class="num">{_NONE}</td>'
                         f'<td class="num">{_NONE}</td>')
            else:
                difference = against.scope(name) or DifferenceScope()
                tests = " ".join(_p_value(test.mcnemar_p) for test in difference.per_replicate)
                cells = (
                    f'<td class="num">{_e(_pp(difference.mean))}</td>'
                    f'<td class="num">{_e(_pp_interval(difference.ci_low, difference.ci_high))}</td>'
                    f'<td class="num">{_e(_p_value(difference.p_value))}</td>'
                    f'<td class="num each">{_e(tests)}</td>'
                )
            rows.append(
                f'<tr class="{"overall" if name == OVERALL else ""}">{head}<td class="run">{_e(arm.label)}</td>'
                f'<td class="num">{_e(_percent(scope.mean))}</td>'
                f'<td class="num">{_e(_ci([scope.ci_low, scope.ci_high]))}</td>'
                f'<td class="num each">{_e(each)}</td>{cells}</tr>'
            )
    robustness = [
        f"<li><b>{_e(label)}</b>: {_e(robustness.order)} \u2212 "
        f"{_e(robustness.baseline_order)}: its \u0394 is the sequence "
        "robustness, paired by seed across replicates and by task within each</li>"
        for label, entry in versus.items() if (robustness := entry.sequence_robustness) is not None
    ]
    links = "".join(
        f'<li><a href="{_e(urllib.parse.quote(str(name)))}">{_e(name)}</a></li>' for name in document.comparisons or []
    )
    seeds = ", ".join(str(seed) for seed in document.seeds)
    labels = " vs ".join(arm.label for arm in arms)
    figure = document.figure or "accuracy"
    figure_heading = "mean accuracy" if figure == "accuracy" else figure
    body = [
        f"<h1>Evo-Memory replicates: {_e(labels)}</h1>",
        f'<p class="meta">{_e(document.replicates)} replicate(s) per arm, seeds {_e(seeds)}; '
        f'baseline <b>{_e(document.baseline)}</b>.</p>',
        _warnings(document.warnings),
        '<div class="scroll"><table class="compare-accuracy replicates"><thead><tr><th>stream</th><th>arm</th>'
        f'<th class="num">{_e(figure_heading)}</th><th class="num">95% CI</th><th class="num">per replicate</th>'
        '<th class="num">\u0394 mean vs baseline</th><th class="num">95% CI of \u0394</th>'
        '<th class="num">p</th>'
        f'<th class="num">McNemar p per replicate</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        f'<p class="meta">{_e(figure_heading[:1].upper() + figure_heading[1:])}: each task averaged over the '
        "replicates, then the mean over tasks, with the 95% Wilson interval on the effective number of tasks "
        "(per replicate: each replicate's summary figure). \u0394: this arm minus the baseline, per task "
        "(paired by task, replicates averaged), with its 95% interval (Agresti & Min on the effective number of "
        f"tasks; MOVER for a mean score) and the paired test's p ({_e(named_tests(document.paired_tests()))}); "
        "McNemar p: "
        "each replicate's exact test on the tasks both ran (docs/statistics.md).</p>"
        + _replicate_notes(arms, list(versus.values())),
        f"<ul>{''.join(robustness)}</ul>" if robustness else "",
        figures,
        f"<h2>Each replicate's comparison</h2><ul>{links}</ul>" if links else "",
    ]
    return "".join(_page(f"evomemory replicates: {labels}", body))



__all__ = ["render_replicates"]
