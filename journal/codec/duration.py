"""kafka-journal's `expireAfter`: a Scala `FiniteDuration` written as its `toString`.

kafka-journal writes `"1 day"`, `"36 hours"`, `"1 millisecond"` - length, a space, the unit's
long name, plural unless the length is 1. It reads a string with Scala 2.13's
`Duration.apply(String)` (whitespace ignored, short unit names such as `d`, `h`, `min`, `ms`
accepted; an integral length keeps its unit, a fractional one is converted to nanoseconds and
re-expressed in the coarsest exact unit) and a bare number as milliseconds.

`parse_duration` follows those rules and `str()` of the result is the text Scala would write,
so decoding normalises `"1.5d"` to `"36 hours"` and `86400000` to `"86400000 milliseconds"`.
Not accepted: infinite durations (they are not finite, Scala rejects them too) and Java's
hexadecimal floating-point literals.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from journal.core.model import InvalidValue

_LONG_MAX = 2**63 - 1


class TimeUnit(Enum):
    """java.util.concurrent.TimeUnit: (nanoseconds per unit, Scala's long name)."""

    DAYS = (86_400_000_000_000, "day")
    HOURS = (3_600_000_000_000, "hour")
    MINUTES = (60_000_000_000, "minute")
    SECONDS = (1_000_000_000, "second")
    MILLISECONDS = (1_000_000, "millisecond")
    MICROSECONDS = (1_000, "microsecond")
    NANOSECONDS = (1, "nanosecond")

    @property
    def nanos(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return self.value[1]


# Scala: the first label is taken as is, the others also with an "s" appended.
_LABELS = {
    TimeUnit.DAYS: "d day",
    TimeUnit.HOURS: "h hr hour",
    TimeUnit.MINUTES: "m min minute",
    TimeUnit.SECONDS: "s sec second",
    TimeUnit.MILLISECONDS: "ms milli millisecond",
    TimeUnit.MICROSECONDS: "µs micro microsecond",
    TimeUnit.NANOSECONDS: "ns nano nanosecond",
}
_UNIT_BY_LABEL = {
    label: unit
    for unit, labels in _LABELS.items()
    for i, word in enumerate(labels.split())
    for label in ((word,) if i == 0 else (word, word + "s"))
}

_LONG_TEXT = re.compile(r"[+-]?\d+")  # Scala's StringParsers.parseLong: any Unicode digit
_DOUBLE_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Java's Character.isWhitespace: separators except the non-breaking ones, plus these controls.
_JAVA_CONTROL_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NON_BREAKING = frozenset("\u00a0\u2007\u202f")


@dataclass(frozen=True, slots=True)
class FiniteDuration:
    length: int
    unit: TimeUnit

    def __post_init__(self) -> None:
        bound = _LONG_MAX // self.unit.nanos
        if not -bound <= self.length <= bound:
            raise InvalidValue(f"duration {self.length} {self.unit.label}s is out of range")

    @property
    def nanos(self) -> int:
        return self.length * self.unit.nanos

    def __str__(self) -> str:
        return f"{self.length} {self.unit.label}{'' if self.length == 1 else 's'}"


def from_nanos(nanos: int) -> FiniteDuration:
    """Scala's `Duration.fromNanos`: the coarsest unit that expresses `nanos` exactly."""
    for unit in TimeUnit:
        if nanos % unit.nanos == 0:
            return FiniteDuration(nanos // unit.nanos, unit)
    raise AssertionError("unreachable: NANOSECONDS divides everything")


def from_millis(millis: int) -> FiniteDuration:
    """What kafka-journal makes of a bare JSON number: `millis.millis`, unit kept."""
    return FiniteDuration(millis, TimeUnit.MILLISECONDS)


def parse_duration(text: str) -> FiniteDuration:
    """Scala 2.13 `Duration(text)`, restricted to finite results; raises InvalidValue."""
    compact = "".join(ch for ch in text if not _is_java_whitespace(ch))
    unit_start = len(compact)
    while unit_start > 0 and compact[unit_start - 1].isalpha():
        unit_start -= 1
    number, unit_name = compact[:unit_start], compact[unit_start:]
    unit = _UNIT_BY_LABEL.get(unit_name)
    if unit is None:
        raise InvalidValue(f"not a finite duration: {text!r} (unknown unit {unit_name!r})")
    if _LONG_TEXT.fullmatch(number):
        length = int(number)
        if not -(2**63) <= length <= _LONG_MAX:
            raise InvalidValue(f"not a finite duration: {text!r} (length out of range)")
        return FiniteDuration(length, unit)
    if not _DOUBLE_TEXT.fullmatch(number):
        raise InvalidValue(f"not a finite duration: {text!r} (bad number {number!r})")
    nanos = float(unit.nanos) * float(number)  # a double product, exactly as Scala computes it
    if math.isinf(nanos):
        raise InvalidValue(f"not a finite duration: {text!r}")
    if not -(2.0**63) <= nanos <= 2.0**63:
        raise InvalidValue(f"not a finite duration: {text!r} (out of range)")
    # Java's Math.round: floor(x + 1/2) computed exactly, saturating at Long.MaxValue.
    rounded = min(math.floor(Fraction(nanos) + Fraction(1, 2)), _LONG_MAX)
    return from_nanos(rounded)


def _is_java_whitespace(ch: str) -> bool:
    if ch in _JAVA_CONTROL_WHITESPACE:
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NON_BREAKING
