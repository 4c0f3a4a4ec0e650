"""The expression tree of a compiled SQL92 filter and its evaluation over a message's properties,
with RocketMQ 4.9.8's three-valued logic (filter/expression/*). `evaluate(props)` returns True,
False or None (null) or raises JavaError where Java throws; only True delivers a message.

`str()` of a node is Java's toString of it, which 4.9.8 puts in its compile error messages.
No I/O.
"""
from __future__ import annotations

from mqtool.common.sql92values import JavaError, compare, java_equals, java_text, parse_double


class Node:
    boolean = False          # a BooleanExpression in Java (can stand where a condition is needed)

    def evaluate(self, props: dict):
        raise NotImplementedError


class Const(Node):
    def __init__(self, value):
        self.value = value
        self.boolean = value is None or isinstance(value, bool)     # TRUE, FALSE, NULL are boolean constants

    def evaluate(self, props):
        return self.value

    def __str__(self):
        return java_text(self.value)


class Prop(Node):
    def __init__(self, name: str):
        self.name = name

    def evaluate(self, props):
        return props.get(self.name)

    def __str__(self):
        return self.name


class Negate(Node):
    def __init__(self, operand: Node):
        self.operand = operand

    def evaluate(self, props):
        v = self.operand.evaluate(props)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None                                   # null, and a String, negate to null
        return -v if isinstance(v, float) else type(v)(-v)

    def __str__(self):
        return f"(- {self.operand})"


class Not(Node):
    boolean = True

    def __init__(self, operand: Node):
        self.operand = operand

    def evaluate(self, props):
        v = self.operand.evaluate(props)
        return None if v is None else not v

    def __str__(self):
        return f"(NOT {self.operand})"


class BoolCast(Node):
    """A bare property where a condition is needed: TRUE only for a Boolean TRUE, which a
    property (always a String) never is."""
    boolean = True

    def __init__(self, operand: Node):
        self.operand = operand

    def evaluate(self, props):
        v = self.operand.evaluate(props)
        if v is None:
            return None
        return v if isinstance(v, bool) else False

    def __str__(self):
        return str(self.operand)


class Logic(Node):
    """AND / OR. A left-deep chain (`p OR q OR r`, Java's ((p OR q) OR r)) is kept as one node with
    its terms in order: evaluated left to right it gives the nested form's result, exceptions
    included, without a recursion level per term."""
    boolean = True

    def __init__(self, op: str, left: Node, right: Node):
        self.op = op
        self.terms = (left.terms if isinstance(left, Logic) and left.op == op else [left]) + [right]

    def evaluate(self, props):
        stop = self.op == "OR"                # AND stops at the first FALSE, OR at the first TRUE
        unknown = False
        for term in self.terms:
            v = term.evaluate(props)
            if v is stop:
                return stop
            unknown = unknown or v is None
        return None if unknown else not stop

    def __str__(self):
        text = str(self.terms[0])
        for term in self.terms[1:]:
            text = f"({text} {self.op} {term})"
        return text


class Equal(Node):
    boolean = True

    def __init__(self, left: Node, right: Node):
        self.left, self.right = left, right

    def evaluate(self, props):
        lv, rv = self.left.evaluate(props), self.right.evaluate(props)
        if type(lv) is str and type(rv) is str:
            return lv == rv                                # String.equals; compareTo is 0 only then too
        if (lv is None) != (rv is None):
            return None if lv is None else False          # asymmetric, as 4.9.8
        if lv is None or java_equals(lv, rv):
            return True
        return compare(lv, rv) == 0

    def __str__(self):
        return f"({self.left} == {self.right})"


_ORDER = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


class Order(Node):
    boolean = True

    def __init__(self, op: str, left: Node, right: Node):
        self.op, self.left, self.right = op, left, right
        self.test = _ORDER[op]

    def evaluate(self, props):
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):     # two properties: both read as doubles
            try:
                lv, rv = parse_double(lv), parse_double(rv)
            except JavaError:
                raise JavaError("java.lang.RuntimeException", "It's illegal to compare string by '>=', '>', "
                                f"'<', '<='. lv={lv}, rv={rv}") from None
        return self.test(compare(lv, rv))

    def __str__(self):
        return f"({self.left} {self.op} {self.right})"


class In(Node):
    boolean = True

    def __init__(self, prop: Prop, values: list[str], negated: bool):
        self.prop, self.values, self.negated = prop, values, negated
        self._set = frozenset(values)

    def evaluate(self, props):
        v = self.prop.evaluate(props)
        if not isinstance(v, str):
            return None
        return (v in self._set) != self.negated

    def __str__(self):
        return f"{self.prop} {'NOT IN' if self.negated else 'IN'} ( {', '.join(self.values)} )"
