"""Units written after a number, read so that two answers that both carry units can disagree.

Normalization (``grpo.verifiers.math.normalize``) drops a unit after a number (``12 \\text{
cm}`` is 12, ``72^\\circ F`` is 72), so an answer with a unit equals a gold without one. When
*both* sides carry units, the units must not conflict: ``72^\\circ F`` vs ``72^\\circ C`` and
``12 cm`` vs ``12 m`` are different answers. :func:`canonical_unit` maps the spellings of the
units in :data:`UNITS` to one name (``cm``, ``centimeters``, ``\\text{ cm}`` → ``cm``;
``°F``, ``degrees Fahrenheit``, ``\\text{F}`` after a degree sign → ``degF``);
:func:`units_conflict` says whether two sets of canonical units disagree.

Rates are two known units joined by ``/`` or ``per`` (``m/s``, ``km/h``, ``miles per hour``,
``mph``): ``72 \\text{ km/h}`` vs ``72 \\text{ m/s}`` differ; a money rate agrees with its
money (``15 dollars per hour`` vs ``\\$15``), any other rate with nothing else (``15 km/h``
vs ``15 km`` differ). Units are never converted
(``1.5 m`` is not ``150 cm``): a gold's number is the value in the unit the question asks for.

Only known units can conflict: an unknown word (``apples``, ``rpm``) conflicts with nothing,
so a spelling missing from the table costs nothing but a missed conflict. A plain degree
(``72^\\circ``, ``72 degrees``) is compatible with a temperature in degrees (``72^\\circ F``):
the gold often omits the scale. Pure text code, no sympy.
"""

from __future__ import annotations

import re

__all__ = ["DEGREE", "UNITS", "canonical_unit", "units_conflict"]

DEGREE = "deg"
"""The canonical name of a plain degree sign (angle or unspecified temperature scale)."""

UNITS: dict[str, tuple[str, ...]] = {
    DEGREE: ("°", "degree", "degrees", "deg"),
    "degF": ("°f", "f", "fahrenheit", "degrees fahrenheit", "degree fahrenheit", "degrees f"),
    "degC": ("°c", "c", "celsius", "centigrade", "degrees celsius", "degree celsius", "degrees c"),
    "K": ("kelvin", "kelvins", "k"),
    "rad": ("rad", "radian", "radians"),
    "mm": ("mm", "millimeter", "millimeters", "millimetre", "millimetres"),
    "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
    "m": ("m", "meter", "meters", "metre", "metres"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    "in": ("in", "inch", "inches"),
    "ft": ("ft", "foot", "feet"),
    "yd": ("yd", "yard", "yards"),
    "mi": ("mi", "mile", "miles"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "min": ("min", "mins", "minute", "minutes"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "day": ("day", "days"),
    "week": ("week", "weeks", "wk", "wks"),
    "year": ("year", "years", "yr", "yrs"),
    "g": ("g", "gram", "grams"),
    "kg": ("kg", "kilogram", "kilograms"),
    "lb": ("lb", "lbs", "pound", "pounds"),
    "oz": ("oz", "ounce", "ounces"),
    "L": ("l", "liter", "liters", "litre", "litres"),
    "mL": ("ml", "milliliter", "milliliters", "millilitre", "millilitres"),
    "dollar": ("dollar", "dollars", "usd"),
    "cent": ("cent", "cents"),
    "euro": ("euro", "euros", "eur"),
}
_SPELLINGS = {spelling: name for name, spellings in UNITS.items() for spelling in spellings}
# rates written as one word: mph is mi/h
_RATES = {"mph": "mi/h", "kph": "km/h", "kmh": "km/h", "kmph": "km/h", "fps": "ft/s"}
_PER = re.compile(r"\s*(?:/|\bper\b)\s*")
_POWER = {"2": "^2", "3": "^3", "square": "^2", "cubic": "^3", "squared": "^2", "cubed": "^3"}
_TEMPERATURES = {"degF", "degC"}
_MONEY = {"dollar", "cent", "euro"}


def canonical_unit(words: str, power: str = "") -> str | None:
    """The canonical name of a unit phrase, or None when it is not a known unit.

    A rate is two known units joined by ``/`` or ``per`` (``m/s``, ``km/h``, ``kilometers per
    hour``, ``mph``), named ``numerator/denominator``; an exponent written after a rate
    belongs to its denominator (``\\text{ m/s}^2`` is ``m/s^2``). A rate with an unknown
    part (``apples/day``) is unknown.

    Args:
        words: the unit as written after the number (``"cm"``, ``"degrees Fahrenheit"``,
            ``"square feet"``, ``"°F"``, ``"km/h"``); case-insensitive.
        power: an exponent written after it (``"2"`` for ``\\text{ cm}^2``), or empty.

    Returns:
        E.g. ``"cm^2"``, ``"degF"``, ``"km/h"``; None for unknown words (``"apples"``).
    """
    words = words.lower().strip()
    if words in _RATES:
        words = _RATES[words]
    per = _PER.split(words)
    if len(per) == 2 and all(per):
        top = canonical_unit(per[0])
        bottom = canonical_unit(per[1], power)
        if top is None or bottom is None or "/" in top + bottom:
            return None
        return f"{top}/{bottom}"
    if len(per) > 2:
        return None
    return _simple_unit(words, power)


def _simple_unit(words: str, power: str) -> str | None:
    """:func:`canonical_unit` of one unit (no rate)."""
    parts = words.replace(".", " ").split()
    exponent = _POWER.get(power, "")
    if parts and parts[0] in ("square", "cubic", "sq"):
        exponent = _POWER.get(parts[0], "^2")
        parts = parts[1:]
    if parts and parts[-1] in ("squared", "cubed"):
        exponent = _POWER[parts[-1]]
        parts = parts[:-1]
    name = _SPELLINGS.get(" ".join(parts))
    if name is None:
        return None
    if exponent and name in (DEGREE, "rad", *_TEMPERATURES):
        return None
    return name + exponent


def _compatible(a: str, b: str) -> bool:
    if a == b:
        return True
    if ("/" in a) != ("/" in b):  # 15 dollars per hour vs a gold of $15: the same amount
        plain = b if "/" in a else a
        return plain in _MONEY and (a if "/" in a else b).partition("/")[0] == plain
    return DEGREE in (a, b) and {a, b} - {DEGREE} <= _TEMPERATURES


def units_conflict(gold: frozenset[str], answer: frozenset[str]) -> bool:
    """True when both sides carry known units and some unit of one has no match in the other.

    Args:
        gold, answer: canonical units of each side (:func:`canonical_unit`); empty when none.

    Returns:
        False when either side carries no known unit (a unit may always be omitted).
    """
    if not gold or not answer:
        return False
    return not (
        all(any(_compatible(g, a) for a in answer) for g in gold)
        and all(any(_compatible(g, a) for g in gold) for a in answer)
    )
