"""The paper's published figures that the results are shown next to (copied as printed).

Huang, Gong, Reiter, "A General Framework for Data-Use Auditing of ML Models",
CCS 2024 (``shared/reference/data-use-auditing-paper.tex``; ``L`` numbers are lines
of that file). CIFAR-10 is the paper's dataset closest to Fashion-MNIST (ten
classes, small images); its ε and K ablations exist for CIFAR-100 only, so those
are quoted from CIFAR-100. The paper's C1–C4 are its CG, CḠ, C̄G, C̄Ḡ (confidence
vector or label only; ground-truth label known or not), the same as ours.

Its setting: ResNet-18 trained 80 epochs (SGD, lr 0.1, the augmentation of Geiping
et al. 2020) on 50,000 images, 10% of them the owner's, all used (N̂ = N);
PGD marks on ResNet-18 features with ε = 10; audit K = 16 random crops, the PPRM
test with α = 0.025, p = 0.05; R = 20 experiments per entry.
"""

from __future__ import annotations

from typing import Final

#: Table 2 (``table:classifier:overview``), CIFAR-10 row (L1259): DSR and Q/M per
#: condition; accuracy 93.64%, Δacc −0.05 points.
MAIN_CIFAR10: Final = {
    "acc": "93.64",
    "delta_acc": "−0.05",
    "C1": ("20/20", "2.20%"),
    "C2": ("20/20", "2.67%"),
    "C3": ("20/20", "4.22%"),
    "C4": ("20/20", "4.65%"),
}

#: Figure 1(a) (``fig:used_published``, L1335–1390): CIFAR-10 DSR (of 20) against the
#: fraction N̂/N of the published data used, 0, 0.1, …, 1. The 0 column is the paper's
#: only false-detection experiment (0/20 in every condition).
FRACTION_CIFAR10: Final = {
    "C1": (0, 0, 0.05, 0.25, 0.8, 1, 1, 1, 1, 1, 1),
    "C2": (0, 0, 0, 0.1, 0.75, 0.95, 0.95, 1, 1, 1, 1),
    "C3": (0, 0, 0.05, 0.15, 0.5, 0.7, 0.95, 1, 1, 1, 1),
    "C4": (0, 0, 0, 0.2, 0.25, 0.5, 0.65, 1, 1, 1, 1),
}

#: Table 11 (``table:classifier:markbound``, L3178–3182), CIFAR-100: ε → (DSR, Q/M)
#: for C1 and C3 (the paper has no CIFAR-10 ε ablation).
EPSILON_CIFAR100: Final = {
    2: {"C1": ("20/20", "2.69%"), "C3": ("11/20", "9.48%")},
    4: {"C1": ("20/20", "0.80%"), "C3": ("20/20", "4.25%")},
    6: {"C1": ("20/20", "0.43%"), "C3": ("20/20", "1.54%")},
    8: {"C1": ("20/20", "0.25%"), "C3": ("20/20", "0.85%")},
    10: {"C1": ("20/20", "0.19%"), "C3": ("20/20", "0.59%")},
}

#: Table 14 (``table:classifier:numaug``, L3464–3469), CIFAR-100: K → (DSR, Q/M, cost)
#: for C1 and C3 (no CIFAR-10 K ablation).
K_CIFAR100: Final = {
    1: {"C1": ("20/20", "0.41%", "410"), "C3": ("20/20", "6.71%", "6,702")},
    2: {"C1": ("20/20", "0.36%", "709"), "C3": ("20/20", "3.21%", "6,408")},
    4: {"C1": ("20/20", "0.34%", "1,334"), "C3": ("20/20", "1.53%", "6,107")},
    8: {"C1": ("20/20", "0.26%", "2,038"), "C3": ("20/20", "0.82%", "6,509")},
    16: {"C1": ("20/20", "0.19%", "2,964"), "C3": ("20/20", "0.59%", "9,312")},
    32: {"C1": ("20/20", "0.30%", "9,364"), "C3": ("20/20", "0.51%", "16,192")},
}

#: Table 5 (``table:classifier:robustness``, L1838–1860), CIFAR-100, R = 20: per
#: countermeasure, accuracy (%) and (DSR, Q/M) in C1–C4; ``None`` where the paper prints
#: "-" (masking probabilities leaves label-only answers unchanged). Keys are the paper's
#: rows: ``top5``, ``top1``, ``memguard``, ``dp0.001``–``dp0.003`` (its σ), ``es20``–``es60``
#: (epochs of 80), ``advreg``, ``pairdetect``, ``noaug``, ``gauss10``–``gauss30``,
#: ``markperturb``, and ``none`` (no adaptive attack).
_Cell = tuple[str, str] | None
ROBUSTNESS_CIFAR100: Final[dict[str, tuple[str, _Cell, _Cell, _Cell, _Cell]]] = {
    "none": (
        "74.29",
        ("20/20", "0.19%"),
        ("20/20", "0.20%"),
        ("20/20", "0.59%"),
        ("20/20", "0.60%"),
    ),
    "top5": ("74.29", ("20/20", "0.21%"), ("20/20", "0.21%"), None, None),
    "top1": ("74.29", ("20/20", "0.24%"), ("20/20", "0.24%"), None, None),
    "memguard": ("74.29", ("20/20", "1.57%"), ("20/20", "1.65%"), None, None),
    "dp0.001": (
        "70.01",
        ("20/20", "0.65%"),
        ("20/20", "5.17%"),
        ("20/20", "0.83%"),
        ("20/20", "3.67%"),
    ),
    "dp0.002": (
        "64.11",
        ("20/20", "3.98%"),
        ("1/20", "9.99%"),
        ("20/20", "5.74%"),
        ("2/20", "9.97%"),
    ),
    "dp0.003": (
        "59.25",
        ("18/20", "8.14%"),
        ("0/20", "10.00%"),
        ("10/20", "9.34%"),
        ("0/20", "10.00%"),
    ),
    "es60": (
        "73.50",
        ("20/20", "0.25%"),
        ("20/20", "0.28%"),
        ("20/20", "0.51%"),
        ("20/20", "0.63%"),
    ),
    "es40": (
        "69.15",
        ("20/20", "0.70%"),
        ("20/20", "3.27%"),
        ("20/20", "1.48%"),
        ("20/20", "3.29%"),
    ),
    "es20": (
        "67.10",
        ("20/20", "3.18%"),
        ("1/20", "10.00%"),
        ("20/20", "5.68%"),
        ("3/20", "9.51%"),
    ),
    "advreg": (
        "60.18",
        ("20/20", "0.74%"),
        ("20/20", "1.78%"),
        ("20/20", "0.91%"),
        ("20/20", "2.90%"),
    ),
    "pairdetect": (
        "74.29",
        ("20/20", "0.20%"),
        ("20/20", "0.20%"),
        ("20/20", "0.64%"),
        ("20/20", "0.74%"),
    ),
    "noaug": (
        "61.59",
        ("20/20", "0.19%"),
        ("20/20", "0.30%"),
        ("20/20", "0.51%"),
        ("20/20", "0.85%"),
    ),
    "gauss10": (
        "70.64",
        ("20/20", "0.40%"),
        ("20/20", "0.45%"),
        ("20/20", "1.72%"),
        ("20/20", "2.08%"),
    ),
    "gauss20": (
        "65.97",
        ("20/20", "1.02%"),
        ("20/20", "1.56%"),
        ("20/20", "5.31%"),
        ("19/20", "7.12%"),
    ),
    "gauss30": (
        "62.10",
        ("20/20", "4.03%"),
        ("20/20", "6.64%"),
        ("16/20", "8.93%"),
        ("6/20", "9.90%"),
    ),
    "markperturb": (
        "70.49",
        ("20/20", "0.52%"),
        ("20/20", "0.56%"),
        ("20/20", "3.00%"),
        ("20/20", "3.29%"),
    ),
}

#: Table ``classifier:baselines`` (L1619–1666): per method, (DSR, accuracy %) at the
#: owner's shares 1%, 2%, 5%, 10% of the training set, R = 20. Keys: ``ours`` (its C4),
#: ``rdata-class`` (RData with labels), ``rdata-super``, ``rdata-one``, ``ubwc-tau0.25``,
#: ``ubwc-tau0.2``. CIFAR-10 has no superclass row.
_Shares = tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]
BASELINES_CIFAR10: Final[dict[str, _Shares]] = {
    "ours": (("8/20", "93.79"), ("11/20", "93.71"), ("19/20", "93.70"), ("20/20", "93.64")),
    "rdata-class": (("1/20", "93.65"), ("2/20", "93.56"), ("2/20", "93.29"), ("4/20", "93.26")),
    "rdata-one": (("0/20", "93.75"), ("0/20", "93.60"), ("0/20", "93.42"), ("0/20", "93.25")),
    "ubwc-tau0.25": (("0/20", "93.50"), ("0/20", "93.14"), ("0/20", "92.67"), ("2/20", "92.73")),
    "ubwc-tau0.2": (("1/20", "93.50"), ("8/20", "93.15"), ("7/20", "92.46"), ("15/20", "92.52")),
}
BASELINES_CIFAR100: Final[dict[str, _Shares]] = {
    "ours": (("20/20", "75.01"), ("20/20", "74.94"), ("20/20", "74.60"), ("20/20", "74.29")),
    "rdata-class": (("5/20", "74.66"), ("14/20", "74.57"), ("20/20", "73.81"), ("20/20", "73.53")),
    "rdata-super": (("4/20", "74.76"), ("10/20", "74.46"), ("14/20", "73.99"), ("19/20", "73.42")),
    "rdata-one": (("0/20", "74.70"), ("0/20", "74.51"), ("1/20", "74.05"), ("0/20", "73.51")),
    "ubwc-tau0.25": (("0/20", "74.60"), ("0/20", "74.16"), ("16/20", "73.30"), ("20/20", "72.32")),
    "ubwc-tau0.2": (("19/20", "74.60"), ("20/20", "74.33"), ("20/20", "73.21"), ("20/20", "72.47")),
}

#: Table ``classifier:multiple_users`` (L1683–1705), CIFAR-100, each owner 10% of the
#: training set: total detections over all owners' attempts in 20 experiments, for 1, 2,
#: 5 and 10 owners (``ours``: its C4; ``rdata``: RData with labels).
MULTIPLE_OWNERS_CIFAR100: Final[dict[str, tuple[str, str, str, str]]] = {
    "ours": ("20/20", "40/40", "100/100", "200/200"),
    "rdata": ("20/20", "38/40", "64/100", "90/200"),
}
