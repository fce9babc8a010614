"""`expireAfter` on the wire of the HTTP API: ISO 8601 durations, as kafka-journal's text inside.

The API speaks ISO 8601 (`P1D`, `PT1H`, `P1DT12H`, `PT0.5S`, `P2W`); the journal stores
kafka-journal's Scala duration text (`1 day`, `36 hours`, `500 milliseconds`). Only exact,
positive durations are accepted: years and months have no fixed length, so they are refused
rather than guessed; a fraction is allowed on the last component only (ISO 8601's rule) and must
resolve to whole nanoseconds, the finest unit kafka-journal knows.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext

from journal import InvalidValue
from journal.codec import FiniteDuration, TimeUnit, from_nanos, parse_duration

_NUMBER = r"[0-9]+(?:[.,][0-9]+)?"  # ASCII digits only: \d would take any script
_ISO_DURATION = re.compile(
    rf"P(?:(?P<years>{_NUMBER})Y)?(?:(?P<months>{_NUMBER})M)?(?:(?P<weeks>{_NUMBER})W)?"
    rf"(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?"
)
_MAX_TEXT = 64
_NANOS = {
    "weeks": 7 * TimeUnit.DAYS.nanos,
    "days": TimeUnit.DAYS.nanos,
    "hours": TimeUnit.HOURS.nanos,
    "minutes": TimeUnit.MINUTES.nanos,
    "seconds": TimeUnit.SECONDS.nanos,
}


def iso_to_duration(text: str) -> FiniteDuration:
    """Parse a positive ISO 8601 duration; raises InvalidValue saying what is wrong."""
    if len(text) > _MAX_TEXT:
        raise InvalidValue(f"an ISO 8601 duration of {len(text)} characters is not plausible")
    match = _ISO_DURATION.fullmatch(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise InvalidValue(f"{text!r} is not an ISO 8601 duration such as P1D, PT1H30M or PT0.5S")
    parts = {name: value for name, value in match.groupdict().items() if value is not None}
    if "years" in parts or "months" in parts:
        raise InvalidValue(
            f"{text!r}: years and months have no fixed length; use weeks, days or hours"
        )
    fractional = [name for name, value in parts.items() if "." in value or "," in value]
    if len(fractional) > 1 or (fractional and fractional[0] != list(parts)[-1]):
        raise InvalidValue(f"{text!r}: only the last component may have a fraction")
    with localcontext() as context:
        # exact arithmetic: the default 28 digits could round a sub-nanosecond fraction away
        context.prec = 2 * _MAX_TEXT
        exact = sum(
            (Decimal(value.replace(",", ".")) * _NANOS[name] for name, value in parts.items()),
            Decimal(0),
        )
    if exact != exact.to_integral_value():
        raise InvalidValue(f"{text!r} is finer than a nanosecond")
    nanos = int(exact)
    if nanos <= 0:
        raise InvalidValue(f"{text!r}: an expiry must be longer than zero")
    return from_nanos(nanos)  # raises InvalidValue beyond Scala's range (about 292 years)


def duration_to_iso(duration: FiniteDuration) -> str:
    """The ISO 8601 form of a duration (what reads answer): days, then hours, minutes, seconds."""
    nanos = duration.nanos
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    days, rest = divmod(nanos, TimeUnit.DAYS.nanos)
    hours, rest = divmod(rest, TimeUnit.HOURS.nanos)
    minutes, rest = divmod(rest, TimeUnit.MINUTES.nanos)
    text = f"{sign}P{days}D" if days else f"{sign}P"
    if hours or minutes or rest or not days:
        text += "T"
        text += f"{hours}H" if hours else ""
        text += f"{minutes}M" if minutes else ""
        if rest or not (days or hours or minutes):
            seconds = Decimal(rest) / TimeUnit.SECONDS.nanos
            text += f"{_plain(seconds)}S"
    return text


def expire_after_to_iso(text: str) -> str | None:
    """The ISO form of a stored kafka-journal duration text; None if it is not one we can read.

    Stored values come from any kafka-journal writer, so an odd one is not an error of the read.
    """
    try:
        return duration_to_iso(parse_duration(text))
    except InvalidValue:
        return None


def _plain(value: Decimal) -> str:
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
