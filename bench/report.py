"""BENCHMARKS.md and its PNG plots, from the sections of one run."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import Row, Section, percentile

ANALYSIS_START = "<!-- analysis -->"
ANALYSIS_END = "<!-- /analysis -->"
# the stamp's line, first in a hand-written analysis: when it was written
_STAMP = re.compile(r"^_Hand-written analysis, written (?P<date>[^;]+);.*$", re.MULTILINE)
_RUN_DATE = re.compile(r"^- date: (?P<date>.+)$", re.MULTILINE)


@dataclass(slots=True)
class RunInfo:
    mode: str  # "full" or "quick"
    commit: str  # short hash, "(dirty)" if the tree had changes
    date: str
    machine: list[str]
    versions: dict[str, str]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    others_before: str
    others_after: str
    seconds: float
    scaling: list[str] = field(default_factory=list)


def _number(value: float | None) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def _verdict(row: Row) -> str:
    if row.met is None:
        return ""
    return "met" if row.met else "**missed**"


def plots(sections: list[Section], directory: Path) -> dict[str, list[Path]]:
    """PNG plots per section title; empty when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    made: dict[str, list[Path]] = {}
    for section in sections:
        paths: list[Path] = []
        slug = _slug(section.title)
        if section.samples:
            figure, axes = plt.subplots(figsize=(9, 5))
            for label, samples in section.samples.items():
                if not samples:
                    continue
                ordered = sorted(samples)
                ranks = [(i + 1) / len(ordered) * 100 for i in range(len(ordered))]
                axes.plot(ordered, ranks, label=label, linewidth=1.2)
            axes.set_xscale("log")
            axes.set_xlabel("latency, ms (log scale)")
            axes.set_ylabel("percentile")
            axes.set_title(f"{section.title}: latency distribution")
            axes.grid(True, which="both", alpha=0.3)
            axes.legend(fontsize=6 if len(section.samples) > 6 else 8, loc="lower right")
            path = directory / f"{slug}_latency.png"
            figure.tight_layout()
            figure.savefig(path, dpi=110)
            plt.close(figure)
            paths.append(path)
        if section.throughputs:
            labels = list(section.throughputs)
            values = [section.throughputs[label] for label in labels]
            height = max(2.5, 0.35 * len(labels) + 1)
            figure, axes = plt.subplots(figsize=(9, height))
            axes.barh(labels, values, color="tab:blue")
            for y, value in enumerate(values):
                axes.text(value, y, f" {value:,.0f}", va="center", fontsize=7)
            axes.invert_yaxis()
            axes.set_xlabel("per second")
            axes.set_title(f"{section.title}: throughput")
            axes.tick_params(axis="y", labelsize=7)
            path = directory / f"{slug}_throughput.png"
            figure.tight_layout()
            figure.savefig(path, dpi=110)
            plt.close(figure)
            paths.append(path)
        made[section.title] = paths
    return made


def _goal_lines(sections: list[Section]) -> list[str]:
    lines = [
        "| section | measure | value | baseline | ratio | goal | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for section in sections:
        for row in section.rows:
            if not row.goal:
                continue
            ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
            lines.append(
                f"| {section.title} | {row.name} | {_number(row.value)} {row.unit} | "
                f"{_number(row.baseline)} | {ratio} | {row.goal} | {_verdict(row)} |"
            )
    return lines


def _missed(sections: list[Section]) -> list[str]:
    lines = []
    for section in sections:
        for row in section.rows:
            if row.met is False:
                lines.append(
                    f"- {section.title}, {row.name}: {_number(row.value)} {row.unit} "
                    f"against the goal {row.goal}{_shortfall(row)}."
                )
    return lines


def _shortfall(row: Row) -> str:
    goal = row.goal
    target: float | None = None
    match = re.match(r"(>=|<=|p50 <=) ?([\d.]+)(x)?", goal.replace("p50 ", ""))
    if match is None:
        return ""
    amount = float(match.group(2))
    if match.group(3):
        if row.baseline is None:
            return ""
        target = amount * row.baseline
    else:
        target = amount
    if target == 0:
        return ""
    return f" (target {_number(target)}: off by {abs(row.value - target) / target:.0%})"


def write(
    sections: list[Section], info: RunInfo, markdown: Path, images: Path, missing_plots: str = ""
) -> None:
    made = plots(sections, images)
    old = markdown.read_text() if markdown.exists() else ""
    analysis = ""
    if ANALYSIS_START in old and ANALYSIS_END in old:
        analysis = old[old.index(ANALYSIS_START) : old.index(ANALYSIS_END) + len(ANALYSIS_END)]
        analysis = stamped(analysis, old, info.date)
    out = [
        "# Benchmarks",
        "",
        "Written by `kafka-journal bench` "
        f"({info.mode} run, {info.seconds / 60:.1f} min); re-run it to refresh this file.",
        "A benchmark, not a test: nothing here fails a build. Every product number has a raw "
        "baseline measured in the same run, on the same servers, at the same moment.",
        "",
        "## Machine and run",
        "",
        f"- date: {info.date}",
        f"- commit: {info.commit}",
        *[f"- {line}" for line in info.machine],
        "- versions: " + ", ".join(f"{k} {v}" for k, v in info.versions.items()),
        "- load average (1/5/15 min) before: "
        + " / ".join(f"{x:.2f}" for x in info.load_before)
        + "; after: "
        + " / ".join(f"{x:.2f}" for x in info.load_after),
        f"- else running before: {info.others_before}",
        f"- else running after: {info.others_after}",
        "- Kafka, Cassandra, the worker, the load generator (and Spark) all share the same "
        "cores: every number includes that contention.",
        *[f"- scaled: {line}" for line in info.scaling],
        "",
        "## Goals",
        "",
        *_goal_lines(sections),
        "",
    ]
    missed = _missed(sections)
    if missed:
        out += ["### Missed goals", "", *missed, ""]
    if analysis:
        out += [analysis, ""]
    if not made:
        out += [f"(No plots: matplotlib is not installed. {missing_plots})", ""]
    for section in sections:
        out += [f"## {section.title}", "", section.method, ""]
        out += [
            "| measure | value | unit | baseline | ratio | goal | spread | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in section.rows:
            ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
            goal = f"{row.goal} ({_verdict(row)})" if row.goal else ""
            out.append(
                f"| {row.name} | {_number(row.value)} | {row.unit} | {_number(row.baseline)} | "
                f"{ratio} | {goal} | {row.spread} | {row.note} |"
            )
        out.append("")
        out += [f"- {note}" for note in section.notes]
        if section.notes:
            out.append("")
        for path in made.get(section.title, []):
            relative = (
                path.relative_to(markdown.parent) if path.is_relative_to(markdown.parent) else path
            )
            out += [f"![{section.title}]({relative.as_posix()})", ""]
        if section.profile:
            out += [
                "<details><summary>profiles</summary>",
                "",
                "```",
                *_trim(section.profile),
                "```",
                "</details>",
                "",
            ]
    markdown.write_text("\n".join(out))


def stamped(analysis: str, old: str, date: str) -> str:
    """The hand-written `analysis` carried over from the `old` file, its first line saying when
    it was written and that this run (of `date`) did not write it, so that staleness shows.
    An analysis without a stamp gets the old file's run date: it was written after that run.
    """
    body = analysis[len(ANALYSIS_START) : -len(ANALYSIS_END)].strip("\n")
    stamp = _STAMP.search(body)
    if stamp is not None:
        written = stamp.group("date")
        body = body[: stamp.start()] + body[stamp.end() :].lstrip("\n")
    else:
        run = _RUN_DATE.search(old)
        written = (
            f"after the run of {run.group('date')}" if run is not None else "at an unknown date"
        )
    line = (
        f"_Hand-written analysis, written {written}; carried over unchanged by the run of "
        f"{date}: its numbers are that earlier run's where the two differ._"
    )
    return "\n".join([ANALYSIS_START, line, "", body, ANALYSIS_END])


def _trim(profile: str, lines: int = 140) -> list[str]:
    return [line.rstrip() for line in profile.strip().splitlines()[:lines]]


def p50(samples: list[float]) -> float:
    return percentile(samples, 50)
