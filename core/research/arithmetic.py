"""Calculations written in a report, checked: "$52,870 - $41,200 = $11,670" holds,
"($11,670 / $41,200) * 100 ≈ 26.4%" does not (it is 28.3%).

The 1.5B writer works out ratios and changes step by step in the report, and gets the
arithmetic wrong as often as right. No passage holds a computed figure, so the claim check
could only say "not in the cited text"; here the calculation itself is redone. A result that
holds is derived from its operands and needs no source of its own; one that does not is
flagged with what it comes to.

Only explicit calculations are read: numbers joined by + - * / × ÷ (with parentheses), then
= or ≈ and the stated result. A stated result may round: "≈ 28.3%" holds for 28.325, "= 11,670"
for 11,670.4; "≈" also allows half a percent of the result. A percentage may be stated for a
fraction (0.283 = 28.3%), unless the expression already multiplies by 100: "(450 / 61,900) *
100 ≈ 72.70%" does not hold, as it comes to 0.7270%.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from core.text import CURRENCY, NUMBER, figures, plain_number

_AMOUNT = rf"(?:{CURRENCY}\s?)?{NUMBER}"  # a figure, or an amount of money
_OPERAND = rf"[(\s]*-?{_AMOUNT}[)\s]*"
_CALCULATION = re.compile(
    rf"(?P<expr>{_OPERAND}(?:[-+*/×÷x]{_OPERAND})+)"
    rf"(?P<rel>=|≈|~=|~)\s*(?P<result>-?{_AMOUNT})\s*(?P<pct>%)?"
)
_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
# An expression that multiplies by 100 itself: its value is already a percentage.
TIMES_100 = re.compile(r"[*×x]\s*100(?![\d,.])|(?<![\d,.])100\s*[*×x]")
APPROX_SHARE = 0.005  # "≈" allows this share of the result beyond its rounding
# Numbers a calculation brings itself, needing no source: percent, thousands, halves (an
# average of two), and the months, quarters and days of a year.
CONSTANTS = frozenset({"2", "4", "12", "100", "365", "1000"})


@dataclass(frozen=True)
class Calculation:
    text: str  # as written, "($11,670 / $41,200) * 100 ≈ 26.4%"
    value: float  # what the expression comes to
    stated: float
    stated_text: str  # the result as key_terms spells it, unsigned: "26.4", "11670"
    holds: bool
    percent: bool = False  # the result is stated as a percentage
    operands: tuple[str, ...] = ()  # the numbers it uses, as :func:`operands` spells them
    scaled: bool = False  # the expression multiplies by 100 itself

    @property
    def comes_to(self) -> str:
        """The expression's value, written like the stated result with two more decimals (a
        fraction stated as a percentage shown as one: 0.264 for "25.0%" is "26.400%")."""
        decimals = len(self.stated_text.split(".")[1]) if "." in self.stated_text else 0
        fraction = self.percent and not self.scaled and abs(self.value) < 1
        value = 100 * self.value if fraction else self.value
        return f"{value:,.{decimals + 2}f}" + ("%" if self.percent else "")


def operands(expr: str) -> list[str]:
    """The numbers ``expr`` uses, as :func:`calculations` spells results ("52,870" ->
    "52870")."""
    return figures(expr)


def sourced(used: list[str], question: str) -> list[str]:
    """Of the operands ``used``, those a passage must state: not the constants a calculation
    brings itself (:data:`CONSTANTS`), nor the figures ``question`` gives."""
    given = set(figures(question))
    return [f for f in used if f not in CONSTANTS and f not in given]


def _parsed(expr: str) -> ast.expr | None:
    """``expr`` as a Python expression tree (currency, thousands commas and × ÷ x read), or
    None when it is not one."""
    plain = re.sub(rf"{CURRENCY}\s?", "", expr).replace(",", "").replace("×", "*").replace("÷", "/")
    plain = re.sub(r"(?<=[\d)\s])x(?=[\s\d(])", "*", plain)
    try:
        return ast.parse(plain.strip(), mode="eval").body
    except SyntaxError:
        return None


def evaluate(expr: str) -> float | None:
    """What an expression of numbers, + - * / × ÷ and parentheses comes to (None when it is
    anything else, or divides by zero)."""
    tree = _parsed(expr)
    if tree is None:
        return None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(node)

    try:
        return walk(tree)
    except (ValueError, ZeroDivisionError):
        return None


def is_change(calculation: str) -> bool:
    """Whether ``calculation`` ("(a - b) / b * 100 = 12.5%", or the expression alone) is the
    relative change of one figure against another, ``(a - b) / b`` (times 100 or not, b the
    same figure both times), or ``a / b - 1``: what a question about growth between two
    periods is worked out as, and nothing else is."""
    node = _unscaled(_parsed(re.split(r"=|≈|~", calculation, maxsplit=1)[0]))
    if not isinstance(node, ast.BinOp):
        return False
    if isinstance(node.op, ast.Div):
        diff = _unscaled(node.left)
        return (
            isinstance(diff, ast.BinOp)
            and isinstance(diff.op, ast.Sub)
            and _same(diff.right, node.right)
        )
    if isinstance(node.op, ast.Sub) and _same(node.right, ast.Constant(value=1)):
        return isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Div)
    return False


def _same(a: ast.expr, b: ast.expr) -> bool:
    return ast.dump(a) == ast.dump(b)


def _unscaled(node: ast.expr | None) -> ast.expr | None:
    """``node`` without a factor of 100 it multiplies by ("x * 100", "100 * x"), and a
    quotient's numerator without one ("100 * x / y" is x / y)."""
    hundred = ast.Constant(value=100)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if _same(node.right, hundred):
            return node.left
        if _same(node.left, hundred):
            return node.right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        top = _unscaled(node.left)
        if top is not node.left and top is not None:
            return ast.BinOp(left=top, op=node.op, right=node.right)
    return node


def _close(value: float, stated: str, approx: bool) -> bool:
    """Whether ``value`` written to the stated number's decimals (and, for ≈, within
    :data:`APPROX_SHARE` of it) is the stated number."""
    decimals = len(stated.split(".")[1]) if "." in stated else 0
    target = float(stated)
    slack: float = 0.5 / 10**decimals + 1e-9
    if approx:
        slack += APPROX_SHARE * abs(target)
    return bool(abs(value - target) <= slack)


_THEN = re.compile(rf"\s*(?P<rel>=|≈|~=|~)\s*(?P<result>-?{_AMOUNT})\s*(?P<pct>%)?")


def calculations(sentence: str) -> list[Calculation]:
    """The explicit calculations in ``sentence``, each redone; a chain ("a / b = 0.283 =
    28.3%") gives one per stated result."""
    out = []
    for m in _CALCULATION.finditer(sentence):
        value = evaluate(m.group("expr"))
        if value is None:
            continue
        expr = m.group("expr")
        scaled = TIMES_100.search(expr) is not None
        step: re.Match[str] | None = m
        while step is not None:
            stated = plain_number(step.group("result"))
            approx = step.group("rel") != "="
            percent = step.group("pct") is not None
            holds = _close(value, stated, approx) or (
                percent and not scaled and _close(100 * value, stated, approx)
            )
            text = " ".join((m.group(0) if step is m else expr + step.group(0)).split())
            out.append(
                Calculation(
                    text,
                    value,
                    float(stated),
                    stated.lstrip("-"),  # key_terms reads no sign: "-4.2%" names "4.2"
                    holds,
                    percent,
                    tuple(operands(expr)),
                    scaled,
                )
            )
            step = _THEN.match(sentence, step.end())
    return out
