"""Turn audit results into the tables of ``docs/results.md`` (Markdown lines).

Definitions (the paper's, §5.3): DSR = detections / experiments; Q = pairs opened
when the test detected, M = the practitioner's training-set size, cost = 2·K·Q
queries; Q/M and cost are averaged over the detecting experiments only. q̂ is the
pooled success rate over untied pairs (successes / draws): 0.5 means the model
cannot tell the published twin from the hidden one. A cell with fewer results than
experiments asked for says ``d/r so far (R asked)``; its other columns are over the
experiments done.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from . import paper
from .specs import (
    CONDITIONS,
    EPSILONS,
    FAMILIES,
    FRACTIONS,
    KS,
    NULL_DRAWS,
    RECIPES,
    TEST,
    AuditSpec,
    Job,
    Plan,
    is_clean_name,
)

Result = Mapping[str, object]


@dataclass(frozen=True)
class Cell:
    """The results of one table cell: R experiments of the same audit on like models."""

    wanted: int
    results: list[Result]

    @property
    def complete(self) -> bool:
        """Whether every experiment has a result."""
        return len(self.results) >= self.wanted

    @property
    def detections(self) -> int:
        """How many experiments detected."""
        return sum(r["decision"] == "detected" for r in self.results)

    def dsr(self) -> str:
        """``d/R``, or how far the cell is."""
        if not self.complete:
            if not self.results:
                return f"0 of {self.wanted} run"
            return f"{self.detections}/{len(self.results)} so far ({self.wanted} asked)"
        return f"{self.detections}/{len(self.results)}"

    def _detected(self) -> list[Result]:
        return [r for r in self.results if r["decision"] == "detected"]

    def q_over_m(self, m: int) -> str:
        """Mean Q/M over the detecting experiments (percent), or —."""
        found = self._detected()
        if not found:
            return "—"
        return f"{100 * statistics.fmean(int(str(r['pairs_opened'])) for r in found) / m:.2f}%"

    def cost(self, k: int) -> str:
        """Mean 2·K·Q over the detecting experiments, or —."""
        found = self._detected()
        if not found:
            return "—"
        return f"{statistics.fmean(2 * k * int(str(r['pairs_opened'])) for r in found):,.0f}"

    def q_hat(self) -> str:
        """Pooled successes / draws, with the draws."""
        draws = sum(int(str(r["draws"])) for r in self.results)
        successes = sum(int(str(r["successes"])) for r in self.results)
        if draws == 0:
            return "—"
        return f"{successes / draws:.3f}"

    def untied(self) -> str:
        """Share of opened pairs that were not ties (draws / pairs opened)."""
        opened = sum(int(str(r["pairs_opened"])) for r in self.results)
        draws = sum(int(str(r["draws"])) for r in self.results)
        if opened == 0:
            return "—"
        return f"{draws / opened:.2f}"


def cell(
    plan: Plan, results: Mapping[str, Result], repeats: int, where: Callable[[Job], bool]
) -> Cell:
    """Return the cell of ``plan``'s jobs selected by ``where`` (one per experiment)."""
    found = [results[j.key] for j in plan.jobs if where(j) and j.key in results]
    return Cell(repeats, found)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def accuracy_summary(values: Sequence[float]) -> str:
    """``mean ± sd`` of accuracies in percent (or the one value)."""
    if not values:
        return "—"
    mean = 100 * statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.2f}%"
    return f"{mean:.2f} ± {100 * statistics.stdev(values):.2f}%"


def _acc(infos: Mapping[str, Mapping[str, object]], names: Sequence[str]) -> list[float]:
    return [float(str(infos[n]["test_accuracy"])) for n in names if n in infos]


def _is(audit: AuditSpec, **fields: object) -> bool:
    return all(getattr(audit, k) == v for k, v in fields.items())


def main_table(
    plan: Plan, results: Mapping[str, Result], infos: Mapping[str, Mapping[str, object]], r: int
) -> list[str]:
    """Conditions × tests: DSR, Q/M, cost, q̂, untied share, false detections; paper alongside."""
    m = plan.models[0].n_train
    used = [s.name for s in plan.models if not s.clean]
    clean = [s.name for s in plan.models if s.clean]
    acc_used, acc_clean = _acc(infos, used), _acc(infos, clean)
    lines = [
        f"Test accuracy: trained on the published data {accuracy_summary(acc_used)}, "
        f"clean {accuracy_summary(acc_clean)}"
        + (
            f", change {100 * (statistics.fmean(acc_used) - statistics.fmean(acc_clean)):+.2f} "
            "points"
            if acc_used and acc_clean
            else ""
        )
        + f" (paper, CIFAR-10: {paper.MAIN_CIFAR10['acc']}%, change "
        f"{paper.MAIN_CIFAR10['delta_acc']} points).",
        "",
    ]
    rows = []
    for condition in CONDITIONS:
        for test in ("mixture-e", "pprm-chernoff"):

            def pick(clean_model: bool, c: str = condition, t: str = test) -> Callable[[Job], bool]:
                return lambda j: j.model.clean == clean_model and _is(j.audit, knowledge=c, test=t)

            hit, miss = cell(plan, results, r, pick(False)), cell(plan, results, r, pick(True))
            k = plan.jobs[0].audit.k
            dsr, qm = paper.MAIN_CIFAR10[condition]
            rows.append(
                [
                    condition,
                    test,
                    hit.dsr(),
                    hit.q_over_m(m),
                    hit.cost(k),
                    hit.q_hat(),
                    hit.untied(),
                    miss.dsr(),
                    miss.q_hat(),
                    f"{dsr}, {qm}" if test == "pprm-chernoff" else "",
                ]
            )
    header = [
        "condition",
        "test",
        "DSR",
        "Q/M",
        "cost 2·K·Q",
        "q̂",
        "untied",
        "false detections (clean models)",
        "q̂ clean",
        "paper CIFAR-10 (DSR, Q/M)",
    ]
    return lines + _table(header, rows)


def fraction_table(plan: Plan, results: Mapping[str, Result], r: int) -> list[str]:
    """DSR and q̂ against the fraction of the published data used (C1, C3); paper alongside."""
    rows = []
    for position, fraction in enumerate(FRACTIONS):
        row: list[object] = [f"{fraction:.1f}"]
        for condition in ("C1", "C3"):

            def pick(job: Job, f: float = fraction, k: str = condition) -> bool:
                return job.model.fraction == f and job.audit.knowledge == k

            c = cell(plan, results, r, pick)
            row += [c.dsr(), c.q_hat()]
        row += [
            f"{paper.FRACTION_CIFAR10['C1'][position]:g}",
            f"{paper.FRACTION_CIFAR10['C3'][position]:g}",
        ]
        rows.append(row)
    header = ["N̂/N", "C1 DSR", "C1 q̂", "C3 DSR", "C3 q̂", "paper C1", "paper C3"]
    return _table(header, rows)


def epsilon_table(
    plan: Plan, results: Mapping[str, Result], infos: Mapping[str, Mapping[str, object]], r: int
) -> list[str]:
    """ε against accuracy, DSR, Q/M, q̂ and false detections (C1, C3); CIFAR-100 alongside."""
    m = plan.models[0].n_train
    rows = []
    for epsilon in EPSILONS:
        names = [s.name for s in plan.models if not s.clean and s.epsilon == epsilon]
        row: list[object] = [epsilon, accuracy_summary(_acc(infos, names))]
        for condition in ("C1", "C3"):

            def pick(clean: bool, e: int = epsilon, k: str = condition) -> Callable[[Job], bool]:
                return lambda j: (
                    j.model.clean == clean and j.vault.epsilon == e and j.audit.knowledge == k
                )

            hit, miss = cell(plan, results, r, pick(False)), cell(plan, results, r, pick(True))
            row += [hit.dsr(), hit.q_over_m(m), hit.q_hat(), miss.dsr()]
        theirs = paper.EPSILON_CIFAR100.get(epsilon)
        row.append("; ".join(f"{k} {v[0]}, {v[1]}" for k, v in theirs.items()) if theirs else "—")
        rows.append(row)
    header = ["ε", "accuracy"]
    for condition in ("C1", "C3"):
        header += [f"{condition} DSR", f"{condition} Q/M", f"{condition} q̂", f"{condition} FD"]
    return _table([*header, "paper CIFAR-100 (DSR, Q/M)"], rows)


def k_table(plan: Plan, results: Mapping[str, Result], r: int) -> list[str]:
    """K against DSR, Q/M, cost and false detections (C1, C3); CIFAR-100 alongside."""
    m = plan.models[0].n_train
    rows = []
    for k in KS:
        row: list[object] = [k]
        for condition in ("C1", "C3"):

            def pick(clean: bool, kk: int = k, c: str = condition) -> Callable[[Job], bool]:
                return lambda j: j.model.clean == clean and _is(j.audit, k=kk, knowledge=c)

            hit, miss = cell(plan, results, r, pick(False)), cell(plan, results, r, pick(True))
            row += [hit.dsr(), hit.q_over_m(m), hit.cost(k), hit.q_hat(), miss.dsr()]
        theirs = paper.K_CIFAR100.get(k)
        row.append(
            "; ".join(f"{c} {v[0]}, {v[1]}, {v[2]}" for c, v in theirs.items()) if theirs else "—"
        )
        rows.append(row)
    header = ["K"]
    for condition in ("C1", "C3"):
        header += [f"{condition} {h}" for h in ("DSR", "Q/M", "cost", "q̂", "FD")]
    return _table([*header, "paper CIFAR-100 (DSR, Q/M, cost)"], rows)


def recipe_table(
    plan: Plan, results: Mapping[str, Result], infos: Mapping[str, Mapping[str, object]], r: int
) -> list[str]:
    """Training recipe × audit perturbation family: DSR (q̂), and false detections, per condition."""
    lines: list[str] = []
    for condition in ("C1", "C3"):
        rows = []
        for recipe in RECIPES:
            names = [s.name for s in plan.models if not s.clean and s.recipe == recipe]
            row: list[object] = [recipe, accuracy_summary(_acc(infos, names))]
            false_detections = []
            for family in FAMILIES:

                def pick(
                    clean: bool, rc: str = recipe, fm: str = family, c: str = condition
                ) -> Callable[[Job], bool]:
                    return lambda j: (
                        j.model.clean == clean
                        and j.model.recipe == rc
                        and _is(j.audit, perturbation=fm, knowledge=c)
                    )

                hit, miss = cell(plan, results, r, pick(False)), cell(plan, results, r, pick(True))
                row.append(f"{hit.dsr()} (q̂ {hit.q_hat()})")
                false_detections.append(f"{miss.dsr()}")
            row.append(" / ".join(false_detections))
            rows.append(row)
        header = ["training recipe", "accuracy", *(f"audit `{f}`" for f in FAMILIES)]
        header.append("false detections (" + " / ".join(FAMILIES) + ")")
        lines += [f"**{condition}**", "", *_table(header, rows), ""]
    return lines


def pooled_false_detections(results: Mapping[str, Result]) -> str:
    """Summarise every claim against a clean classifier in ``results`` (one line).

    Claims against one model share its publication bits, so they are not independent
    trials; the per-model count says how many distinct models ever false-detected.
    """
    clean = [r for r in results.values() if is_clean_name(str(r["model"]))]
    if not clean:
        return "No claim against a clean model has run yet."
    detected = [r for r in clean if r["decision"] == "detected"]
    models = {str(r["model"]) for r in clean}
    flagged = {str(r["model"]) for r in detected}
    return (
        f"Every claim against a clean model so far, all tables together: {len(detected)} of "
        f"{len(clean)} detected ({100 * len(detected) / len(clean):.1f}%; each claim's bound is "
        f"p = 5%), on {len(flagged)} of the {len(models)} clean models."
    )


def null_table(plan: Plan, results: Mapping[str, Result], r: int) -> list[str]:
    """Count false detections per clean model and condition over fresh publication bits."""
    rows = []
    for condition in ("C1", "C3"):
        for model in plan.models:

            def pick(job: Job, m: str = model.name, c: str = condition) -> bool:
                return job.model.name == m and job.audit.knowledge == c

            c = cell(plan, results, NULL_DRAWS, pick)
            rows.append([condition, f"seed {model.seed}", c.dsr(), c.q_hat()])

        def in_condition(job: Job, c: str = condition) -> bool:
            return job.audit.knowledge == c

        pooled = cell(plan, results, NULL_DRAWS * r, in_condition)
        share = f" ({100 * pooled.detections / len(pooled.results):.1f}%)" if pooled.results else ""
        rows.append([condition, "**all**", pooled.dsr() + share, pooled.q_hat()])
    header = ["condition", "clean model", "false detections / claims", "q̂"]
    return [
        f"Each clean model is audited under {NULL_DRAWS} fresh draws of the arbiter's "
        "randomness (new publication bits, new audit order), K = 8 `pad-shift-flip`, "
        "`mixture-e` at p = 0.05: every claim's false-detection probability is at most "
        "5%, whatever the model.",
        "",
        *_table(header, rows),
    ]


def _owner_acc(infos: Mapping[str, Mapping[str, object]], names: Sequence[str]) -> list[float]:
    return [
        float(str(infos[n]["owner_accuracy"]))
        for n in names
        if "owner_accuracy" in infos.get(n, {})
    ]


def _train_acc(infos: Mapping[str, Mapping[str, object]], names: Sequence[str]) -> list[float]:
    return [float(str(infos[n]["train_accuracy"])) for n in names if n in infos]


def ladder_table(
    plan: Plan, results: Mapping[str, Result], infos: Mapping[str, Mapping[str, object]], r: int
) -> list[str]:
    """Return one rung of the regime ladder: accuracies, then per claim DSR, Q/M, q̂, FD."""
    used = [s.name for s in plan.models if not s.clean]
    clean = [s.name for s in plan.models if s.clean]
    m = plan.models[0].n_train
    train = [accuracy_summary(_train_acc(infos, names)) for names in (used, clean)]
    test = [accuracy_summary(_acc(infos, names)) for names in (used, clean)]
    lines = [
        f"Accuracy (models trained on the published data / clean): train "
        f"{train[0]} / {train[1]}, test {test[0]} / {test[1]}; "
        f"on the owner's published items the used models trained on: "
        f"{accuracy_summary(_owner_acc(infos, used))}.",
        "",
    ]
    rows = []
    markers = list(dict.fromkeys(s.marker for s in plan.models if not s.clean))
    for marker in markers:
        for audit in dict.fromkeys(j.audit for j in plan.jobs if not j.audit.rho_draw):

            def pick(
                clean_model: bool, a: AuditSpec = audit, mk: str = marker
            ) -> Callable[[Job], bool]:
                return lambda job: (
                    job.model.clean == clean_model and job.vault.marker == mk and job.audit == a
                )

            hit, miss = cell(plan, results, r, pick(False)), cell(plan, results, r, pick(True))
            statistic = "" if audit.statistic == "entropy" else f", {audit.statistic}"
            statistic += f", margin {audit.margin:g}" if audit.margin else ""
            statistic += f", `{audit.test}`" if audit.test != TEST else ""
            rows.append(
                [
                    f"`{marker}` ε = {plan.jobs[0].vault.epsilon}",
                    f"{audit.knowledge}, `{audit.perturbation}` K = {audit.k}{statistic}",
                    hit.dsr(),
                    hit.q_over_m(m),
                    hit.q_hat(),
                    hit.untied(),
                    miss.dsr(),
                    miss.q_hat(),
                ]
            )
    header = ["marks", "claim", "DSR", "Q/M", "q̂", "untied", "false detections", "q̂ clean"]
    lines += _table(header, rows)
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    for audit in dict.fromkeys(replace(j.audit, rho_draw=0) for j in redrawn):

        def drawn(job: Job, a: AuditSpec = audit) -> bool:
            return bool(job.audit.rho_draw) and replace(job.audit, rho_draw=0) == a

        wanted = sum(drawn(j) for j in redrawn)
        null = cell(plan, results, wanted, drawn)
        share = f" ({null.detections / len(null.results):.1%})" if null.results else ""
        lines += [
            "",
            f"Null check, {audit.knowledge} `{audit.perturbation}` K = {audit.k}"
            f"{f', margin {audit.margin:g}' if audit.margin else ''}"
            f"{f', `{audit.test}`' if audit.test != TEST else ''}: the clean "
            f"models under fresh publication bits (with every vault of their seed), "
            f"{null.dsr()} claims detected{share} (q̂ {null.q_hat()}); each claim's bound "
            f"is p = {audit.p:g}.",
        ]
    return lines
