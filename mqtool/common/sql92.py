"""SQL92 message filters as RocketMQ 4.9.8 reads them (MessageSelector.bySql; filter/parser/
SelectorParser.jj): the parser and the compile-time checks, quirks kept (tokens in sql92lex.py, the
generated parser's bookkeeping that words its errors in sql92javacc.py). Pure: the broker compiles
and evaluates with it, the client and the CLI check an expression before sending it.

    f = compile_sql92("region = 'eu' AND amount > 100")     # FilterCompileError when 4.9.8 refuses it
    f.matches({"region": "eu", "amount": "250"})            # True: only TRUE delivers

Quirks of 4.9.8 kept, because a Java consumer gets them from a Java broker: input after the longest
valid prefix is ignored (`a = 'x' b = 'y'` is `a = 'x'`, `a LIKE 'x%'` is a bare `a` that never
matches); an integer literal makes the property be parsed as a Java int (`a > 5` errors, so skips,
on "1.5"). `Sql92Filter.quirks` says in words where such a quirk changes what the text seems to say.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.common.sql92expr import (BoolCast, Const, Equal, In, Logic, Negate, Node, Not, Order, Prop)
from mqtool.common.sql92javacc import (IS_NULL, LITERALS, NOT_BETWEEN, NOT_IN, PLUS, UNBOUNDED, JavaccParser)
from mqtool.common.sql92lex import PARSE_EXCEPTION, RUNTIME, FilterCompileError
from mqtool.common.sql92values import (DOUBLE_MAX, DOUBLE_MIN, LONG_MAX, INT_MAX, JavaError, JLong, compare,
                                       java_text)

__all__ = ["SQL92", "FilterCompileError", "Sql92Filter", "compile_sql92"]

SQL92 = "SQL92"


class _Parser(JavaccParser):
    """SelectorParser.jj's productions with their actions, choice by choice as the generated
    parser takes them (the `mark` indices are its jj_la1 ones), so errors come out as 4.9.8's."""

    def __init__(self, text: str):
        super().__init__(text)
        self.literal_props: list[tuple[str, str]] = []    # (property, integer literal) pairs compared

    # JmsSelector := orExpression   (no end-of-input check: the rest of the text is left unread)
    def selector(self) -> Node:
        return self.as_boolean(self.or_expr())

    def as_boolean(self, node: Node) -> Node:
        if node.boolean:
            return node
        if isinstance(node, Prop):
            return BoolCast(node)
        raise FilterCompileError(PARSE_EXCEPTION, f"Expression will not result in a boolean value: {node}")

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.at(0, "OR"):
            self.consume("OR")
            right = self.and_expr()
            left = Logic("OR", self.as_boolean(left), self.as_boolean(right))
        return left

    def and_expr(self) -> Node:
        left = self.equality()
        while self.at(1, "AND"):
            self.consume("AND")
            right = self.equality()
            left = Logic("AND", self.as_boolean(left), self.as_boolean(right))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while self.at(2, "IS", "=", "<>"):
            kind = self.ntk()
            if kind in ("=", "<>"):
                self.consume(kind)
                right = self.comparison()
                left = self.equal(left, right) if kind == "=" else Not(self.equal(left, right))
                continue
            self.mark(3)
            if self.lookahead(IS_NULL, 2):
                self.consume("IS"), self.consume("NULL")
                left = Equal(left, Const(None))
            elif self.ntk() == "IS":
                self.consume("IS"), self.consume("NOT"), self.consume("NULL")
                left = Not(Equal(left, Const(None)))
            else:
                raise self.fail(4)
        return left

    def comparison(self) -> Node:
        left = self.unary()
        while self.at(5, "NOT", "BETWEEN", "IN", ">", ">=", "<", "<="):
            kind = self.ntk()
            if kind in (">", ">=", "<", "<="):
                self.consume(kind)
                left = self.order(kind, left, self.unary())
            elif kind == "BETWEEN":
                self.consume(kind)
                left = self.between_bounds(left, False)
            else:
                left = self.not_or_in(left)
        return left

    def not_or_in(self, left: Node) -> Node:
        """The loop's other choices, each NOT one after a LOOKAHEAD(2)."""
        self.mark(8)
        if self.lookahead(NOT_BETWEEN, 2):
            self.consume("NOT"), self.consume("BETWEEN")
            return self.between_bounds(left, True)
        if self.ntk() == "IN":
            self.consume("IN")
            return self.in_list(left, False, 6)
        self.mark(9)
        if self.lookahead(NOT_IN, 2):
            self.consume("NOT"), self.consume("IN")
            return self.in_list(left, True, 7)
        raise self.fail()           # NOT entered the loop, then fits none of its NOT choices

    def between_bounds(self, left: Node, negated: bool) -> Node:
        low = self.unary()
        self.consume("AND")
        high = self.unary()
        return self.between(left, low, high, negated)

    def in_list(self, left: Node, negated: bool, loop: int) -> Node:
        self.consume("(")
        values = [self.string()]
        while self.at(loop, ","):
            self.consume(",")
            values.append(self.string())
        self.consume(")")
        if not isinstance(left, Prop):
            raise FilterCompileError(RUNTIME, f"Expected a property for In expression, got: {left}")
        return In(left, values, negated)

    def unary(self) -> Node:
        if self.lookahead(PLUS, UNBOUNDED):       # "+" unaryExpr(): the whole operand must follow
            self.consume("+")
            return self.unary()
        kind = self.ntk()
        if kind == "-":
            self.consume(kind)
            return Negate(self.unary())
        if kind == "NOT":
            self.consume(kind)
            return Not(self.as_boolean(self.unary()))
        if kind in LITERALS or kind in ("ID", "("):
            return self.primary()
        raise self.fail(10)

    def primary(self) -> Node:
        kind = self.ntk()
        if kind == "STRING":
            return Const(self.string())
        if kind == "DECIMAL":
            return Const(_integer(self.consume(kind).text))
        if kind == "FLOAT":
            return Const(_decimal(self.consume(kind).text))
        if kind in ("TRUE", "FALSE", "NULL"):
            self.consume(kind)
            return Const({"TRUE": True, "FALSE": False, "NULL": None}[kind])
        if kind == "ID":
            return Prop(self.consume(kind).text)
        if kind == "(":
            self.consume(kind)
            node = self.or_expr()
            self.consume(")")
            return node
        raise self.fail(11)

    def string(self) -> str:
        return self.consume("STRING").text[1:-1].replace("''", "'")

    # the compile-time checks of ComparisonExpression
    def equal(self, left: Node, right: Node) -> Node:
        for side in (left, right):
            if isinstance(side, Const) and side.value is None:
                raise FilterCompileError(RUNTIME, f"'{side}' cannot be compared.")
        if isinstance(left, Const) and isinstance(right, Const) and left.boolean and not right.boolean:
            raise FilterCompileError(RUNTIME, f"'{left}' cannot be compared with '{right}'")
        self._note_int_literal(left, right)
        return Equal(left, right)

    def order(self, op: str, left: Node, right: Node) -> Node:
        for side in (left, right):
            if (isinstance(side, Const) and (isinstance(side.value, bool) or not isinstance(side.value, (int, float)))) \
                    or (not isinstance(side, Const) and side.boolean):
                raise FilterCompileError(RUNTIME, f"Value '{side}' cannot be compared.")
        self._note_int_literal(left, right)
        return Order(op, left, right)

    def between(self, value: Node, low: Node, high: Node, negated: bool) -> Node:
        if negated:
            return Logic("OR", self.order("<", value, low), self.order(">", value, high))
        if isinstance(low, Const) and isinstance(high, Const):
            lv, hv = low.value, high.value
            if lv is None or hv is None:
                raise FilterCompileError(RUNTIME, "Illegal values of between, values can not be null!")
            try:
                smaller = compare(hv, lv) < 0
            except JavaError as exc:
                raise FilterCompileError(exc.java_class, exc.message) from None
            if smaller:
                raise FilterCompileError(RUNTIME, f"Illegal values of between, left value({_format(lv)}) must "
                                                  f"less than or equal to right value({_format(hv)})")
        return Logic("AND", self.order(">=", value, low), self.order("<=", value, high))

    def _note_int_literal(self, left: Node, right: Node) -> None:
        for a, b in ((left, right), (right, left)):
            if isinstance(a, Prop) and _int_literal(b) is not None:
                self.literal_props.append((a.name, _int_literal(b)))


def _int_literal(node: Node) -> str | None:
    while isinstance(node, Negate):
        node = node.operand
    if isinstance(node, Const) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return "Long" if isinstance(node.value, JLong) else "int"
    return None


def _format(v) -> str:
    """String.format("%s", v)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else java_text(v)


def _integer(text: str):
    """ConstantExpression.createFromDecimal: a Long first, an Integer when it fits."""
    digits = text[:-1] if text[-1] in "lL" else text
    n = int(digits)
    if n > LONG_MAX:
        raise FilterCompileError("java.lang.NumberFormatException", f'For input string: "{digits}"')
    return n if n <= INT_MAX else JLong(n)


def _decimal(text: str) -> float:
    """ConstantExpression.createFloat: finite and at least Double.MIN_VALUE (so 0.0 is refused)."""
    value = float(text)
    if value > DOUBLE_MAX:
        raise FilterCompileError(RUNTIME, f"{text} is greater than 1.7976931348623157E308")
    if value < DOUBLE_MIN:
        raise FilterCompileError(RUNTIME, f"{text} is less than 4.9E-324")
    return value


@dataclass
class Sql92Filter:
    """A compiled expression: `evaluate` gives Java's result, `matches` the delivery decision."""
    text: str
    root: Node
    read_as: str                          # the part of the text 4.9.8 reads
    quirks: list[str] = field(default_factory=list)    # where the reading differs from what the text says
    # where a message's value may not be the type a literal makes it (an integer literal: a Java int or
    # Long); documented, and not a different reading of the text, so nobody is warned of it
    type_notes: list[str] = field(default_factory=list)

    def evaluate(self, props: dict):
        """True, False, None (null), or JavaError where the 4.9.8 evaluator throws."""
        try:
            return self.root.evaluate(props)
        except RecursionError:
            raise JavaError("java.lang.StackOverflowError", "null") from None

    def matches(self, props: dict) -> bool:
        """Delivered only on TRUE; FALSE, null and an evaluation error skip the message."""
        try:
            return self.evaluate(props) is True
        except JavaError:
            return False


def compile_sql92(text: str | None) -> Sql92Filter:
    """Compile as 4.9.8's SqlFilter does; FilterCompileError with the cause's class and message."""
    if text is None:
        raise FilterCompileError("java.lang.NullPointerException", "null")
    parser = _Parser(text)
    try:
        root = parser.selector()
        end = parser.last.end if parser.last else 0
        return Sql92Filter(text, root, text[:end].strip(), _quirks(text, end, root), _type_notes(parser))
    except RecursionError:          # Java's parser overflows its stack too, and says so
        raise FilterCompileError("java.lang.StackOverflowError", "null") from None


def _quirks(text: str, end: int, root: Node) -> list[str]:
    """Where 4.9.8 reads the text otherwise than it looks, in words."""
    notes = []
    tail = text[end:].strip()
    if tail and not (tail.startswith("--") and "\n" not in tail and "\r" not in tail):
        notes.append(f"the text after {text[:end].strip()!r} ({tail!r}) is ignored, as RocketMQ 4.9.8 ignores it")
    for node in _walk(root):
        if isinstance(node, BoolCast):
            notes.append(f"a bare property ({node}) used as a condition is never TRUE")
        elif isinstance(node, Equal) and node.left.boolean and _text(node.right):
            notes.append(f"{node.left} compared with the text {node.right} never matches (4.9.8 throws a "
                         "ClassCastException there); NOT binds tighter than =, so write NOT (a = 'x')")
        elif isinstance(node, Negate) and isinstance(node.operand, Prop):
            notes.append(f"-{node.operand} is NULL for every message (a property is text), so it never matches")
    return list(dict.fromkeys(notes))


def _type_notes(parser: _Parser) -> list[str]:
    notes = []
    for name, cls in parser.literal_props:
        notes.append(f"{name} is compared with an integer literal, so its value is parsed as a Java {cls}: "
                     f"a message whose {name} is not one (say 1.5) never matches; write the literal with "
                     f"a decimal point (5.0) to compare as numbers")
    return list(dict.fromkeys(notes))


def _text(node: Node) -> bool:
    """A property or a string literal: a String when evaluated."""
    return isinstance(node, Prop) or (isinstance(node, Const) and isinstance(node.value, str))


def _walk(node: Node):
    yield node
    for child in ("operand", "left", "right"):
        sub = getattr(node, child, None)
        if sub is not None:
            yield from _walk(sub)
    for term in getattr(node, "terms", ()):
        yield from _walk(term)
