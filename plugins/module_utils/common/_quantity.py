# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Kubernetes resource quantities (``12``, ``500m``, ``64Gi``, ``1e3``), exactly: :func:`parse` returns a
``fractions.Fraction`` or ``None`` for what the API server would refuse (the grammar of
k8s.io/apimachinery/pkg/api/resource: a signed decimal number, then a binary suffix Ki..Ei, a decimal suffix
n u m k M G T P E, or a decimal exponent e<n>/E<n>)."""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?\Z")


def parse(value: object) -> Fraction | None:
    """The quantity's exact value, or None when ``value`` is not a quantity (bools are not quantities)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    m = _RE.match(str(value).strip())
    if not m or not str(value).strip():
        return None
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def show(value: Fraction) -> str:
    """A plain rendering for messages: an integer as such, else a decimal (``0.5``)."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):g}"


_DECIMAL_BY_EXP = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical(value: object) -> str | None:
    """The string the API server stores for a quantity (resource.Quantity's canonical form): the input's format kept
    (binary when written with Ki..Ei, decimal otherwise), the largest suffix whose mantissa is an integer -
    ``8`` -> ``"8"``, ``2000`` -> ``"2k"``, ``"0.5"`` -> ``"500m"``, ``"1024Mi"`` -> ``"1Gi"``, ``"1536Mi"`` ->
    ``"1536Mi"``. None for what is not a quantity. (Values written with an exponent, 1e3, are rendered in decimal
    SI form; the API server keeps their exponent form.)"""
    exact = parse(value)
    if exact is None:
        return None
    if exact == 0:
        return "0"
    sign = "-" if exact < 0 else ""
    mag = abs(exact)
    text = str(value).strip()
    if any(text.endswith(suffix) for suffix in _BINARY) and mag.denominator == 1 and mag >= 1024:
        for suffix, factor in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            if mag % factor == 0:
                return f"{sign}{mag // factor}{suffix}"
    for exp in sorted(_DECIMAL_BY_EXP, reverse=True):
        scaled = mag / Fraction(10) ** exp
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{_DECIMAL_BY_EXP[exp]}"
    # below a nano unit the API server rounds up to 1n
    return f"{sign}1n"
