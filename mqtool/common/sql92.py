"""SQL92 message filters as RocketMQ 4.9.8 reads them (MessageSelector.bySql; filter/parser/
SelectorParser.jj): the lexer, the parser and the compile-time checks, quirks kept. Pure: the
broker compiles and evaluates with it, the client and the CLI check an expression before sending it.

    f = compile_sql92("region = 'eu' AND amount > 100")     # FilterCompileError when 4.9.8 refuses it
    f.matches({"region": "eu", "amount": "250"})            # True: only TRUE delivers

Quirks of 4.9.8 kept, because a Java consumer gets them from a Java broker: input after the longest
valid prefix is ignored (`a = 'x' b = 'y'` is `a = 'x'`, `a LIKE 'x%'` is a bare `a` that never
matches); an integer literal makes the property be parsed as a Java int (`a > 5` errors, so skips,
on "1.5"). `Sql92Filter.quirks` says in words where such a quirk changes what the text seems to say.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mqtool.common.sql92expr import (BoolCast, Const, Equal, In, Logic, Negate, Node, Not, Order, Prop)
from mqtool.common.sql92values import (DOUBLE_MAX, DOUBLE_MIN, LONG_MAX, INT_MAX, JavaError, JLong, compare,
                                       java_text)

SQL92 = "SQL92"
PARSE_EXCEPTION = "org.apache.rocketmq.filter.parser.ParseException"
TOKEN_MGR_ERROR = "org.apache.rocketmq.filter.parser.TokenMgrError"
RUNTIME = "java.lang.RuntimeException"

KEYWORDS = ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS")
# kind -> JavaCC's tokenImage, as ParseException prints it
IMAGES = {"EOF": "<EOF>", "DECIMAL": "<DECIMAL_LITERAL>", "FLOAT": "<FLOATING_POINT_LITERAL>",
          "STRING": "<STRING_LITERAL>", "ID": "<ID>", **{k: f'"{k}"' for k in KEYWORDS},
          **{s: f'"{s}"' for s in ("=", "<>", ">", ">=", "<", "<=", "(", ")", ",", "+", "-")}}

# JavaCC's token kinds in SelectorParserConstants order: "Was expecting" lists them in this order
KIND_ORDER = ["EOF", "NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "DECIMAL", "FLOAT", "STRING",
              "ID", "=", "<>", ">", ">=", "<", "<=", "(", ",", ")", "+", "-"]
FIRST_UNARY = ("NOT", "TRUE", "FALSE", "NULL", "DECIMAL", "FLOAT", "STRING", "ID", "(", "+", "-")
LOOPS = {"or": ("OR",), "and": ("AND",), "equality": ("=", "<>", "IS"),
         "comparison": ("NOT", "BETWEEN", "IN", ">", ">=", "<", "<="), "in": (",",)}

_PATTERNS = [      # (kind, regex); the longest match wins, the first listed on a tie
    ("SKIP", re.compile(r"[ \t\n\r\f]")),
    ("SKIP", re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")),
    ("SKIP", re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")),
    ("DECIMAL", re.compile(r"0|[1-9][0-9]*[lL]?")),
    ("FLOAT", re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?")),
    ("FLOAT", re.compile(r"\.[0-9]+(?:[eE][+-]?[0-9]+)?")),
    ("FLOAT", re.compile(r"[0-9]+[eE][+-]?[0-9]+")),
    ("STRING", re.compile(r"'(?:''|[^'])*'")),
    ("ID", re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")),
    ("SYM", re.compile(r"<>|>=|<=|[=><(),+-]")),
]


class FilterCompileError(ValueError):
    """4.9.8 refuses the expression: `java_class` and `message` of the cause, as the broker's
    remark (`<class>: <message>`) carries them."""

    def __init__(self, java_class: str, message: str):
        super().__init__(f"{java_class}: {message}")
        self.java_class, self.message = java_class, message


@dataclass
class Token:
    kind: str
    text: str
    start: int
    end: int
    line: int
    column: int


def _escape(text: str) -> str:
    """JavaCC's addEscapes."""
    out = []
    for ch in text:
        code = ord(ch)
        special = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "'": "\\'",
                   "\\": "\\\\"}.get(ch)
        out.append(special or (f"\\u{code:04x}" if code < 0x20 or code > 0x7E else ch))
    return "".join(out)


class _Lexer:
    """Tokens on demand (JavaCC's token manager is asked one token at a time, so a lexical error
    past the part the parser reads is never seen)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.lines, self.cols = _positions(text)

    def _where(self, i: int) -> tuple[int, int]:
        return (self.lines[i], self.cols[i]) if i < len(self.text) else self._eof_where()

    def _eof_where(self) -> tuple[int, int]:
        return (self.lines[-1], self.cols[-1]) if self.text else (0, 0)

    def next(self) -> Token:
        text = self.text
        while True:
            if self.pos >= len(text):
                return Token("EOF", "", self.pos, self.pos, *self._eof_where())
            best_kind, best_len = None, 0
            for kind, rx in _PATTERNS:
                m = rx.match(text, self.pos)
                if m and len(m.group()) > best_len:
                    best_kind, best_len = kind, len(m.group())
            if best_kind is None:
                self._fail()
            start, self.pos = self.pos, self.pos + best_len
            if best_kind == "SKIP":
                continue
            word = text[start:self.pos]
            kind = best_kind
            if kind == "ID" and word.upper() in KEYWORDS:
                kind = word.upper()
            elif kind == "SYM":
                kind = word
            return Token(kind, word, start, self.pos, *self._where(start))

    def _fail(self):
        """TokenMgrError: where the longest attempt died, and what it had read."""
        text, p = self.text, self.pos
        if text[p] == "'" or text.startswith("/*", p):      # an unclosed string or comment: dies at the end
            dead = len(text)
        elif text[p] in "./" and p + 1 <= len(text):
            dead = p + 1
        else:
            dead = p
        after = _escape(text[p:dead])
        if dead >= len(text):            # after the last character (on the next line after a line end)
            line, col = self.lines[-1], self.cols[-1] + 1
            if text[-1] in "\r\n":
                line, col = line + 1, 0
            msg = f"Lexical error at line {line}, column {col}.  Encountered: <EOF> after : \"{after}\""
        else:
            ch = text[dead]
            line, col = self.lines[dead], self.cols[dead]
            msg = (f"Lexical error at line {line}, column {col}.  Encountered: \"{_escape(ch)}\" ({ord(ch)}), "
                   f"after : \"{after}\"")
        raise FilterCompileError(TOKEN_MGR_ERROR, msg)


def _positions(text: str) -> tuple[list[int], list[int]]:
    """SimpleCharStream's line and column of every character (tabs to the next multiple of 8)."""
    lines, cols = [], []
    line, col, prev_cr, prev_lf = 1, 0, False, False
    for ch in text:
        col += 1
        if prev_lf:
            prev_lf = False
            line, col = line + 1, 1
        elif prev_cr:
            prev_cr = False
            if ch == "\n":
                prev_lf = True
            else:
                line, col = line + 1, 1
        if ch == "\r":
            prev_cr = True
        elif ch == "\n":
            prev_lf = True
        elif ch == "\t":
            col -= 1
            col += 8 - col % 8
        lines.append(line)
        cols.append(col)
    return lines, cols


def _parse_error(tok: Token, expected) -> FilterCompileError:
    """ParseException's text: the token met, then every token kind the grammar tried at that point."""
    if tok.kind == "EOF":
        seen = "<EOF>"
    else:
        seen = f' {IMAGES[tok.kind]} "{_escape(tok.text)} "'
    kinds = sorted(set(expected), key=KIND_ORDER.index)
    head = "Was expecting:" if len(kinds) == 1 else "Was expecting one of:"
    listed = "".join(f"{IMAGES[k]} ...\n    " for k in kinds)
    return FilterCompileError(PARSE_EXCEPTION, f'Encountered "{seen}" at line {tok.line}, column {tok.column}.\n'
                                               f"{head}\n    {listed}")


class _Parser:
    def __init__(self, text: str):
        self.lexer = _Lexer(text)
        self.ahead: list[Token] = []
        self.last: Token | None = None         # the last token the grammar consumed
        self.consumed = 0
        self.tried: tuple[int, set[str]] = (0, set())     # kinds tried at the current token (jj_la1)
        self.scanning = 0                      # > 0 inside a syntactic lookahead
        self.literal_props: list[tuple[str, str]] = []    # (property, integer literal) pairs compared

    def peek(self, k: int = 0) -> Token:
        while len(self.ahead) <= k:
            self.ahead.append(self.lexer.next())
        return self.ahead[k]

    def take(self, kind: str | None = None) -> Token:
        tok = self.peek()
        if kind is not None and tok.kind != kind:
            raise self.error(kind)
        self.last = self.ahead.pop(0)
        self.consumed += 1
        return self.last

    def refuse(self, java_class: str, message: str) -> None:
        """A compile-time check failed; not while scanning ahead, where JavaCC runs no actions."""
        if not self.scanning:
            raise FilterCompileError(java_class, message)

    def literal(self, make, text: str):
        try:
            return make(text)
        except FilterCompileError:
            if self.scanning:
                return 0
            raise

    def plus_operand_follows(self) -> bool:
        """LOOKAHEAD("+" unaryExpr()): the grammar takes the unary plus only when a whole unary
        expression follows it, syntax alone; a lexical error met on the way ends the compile."""
        saved = (self.lexer.pos, list(self.ahead), self.last, self.consumed, (self.tried[0], set(self.tried[1])),
                 list(self.literal_props))
        self.scanning += 1
        try:
            self.take()
            self.unary()
            return True
        except FilterCompileError as exc:
            if exc.java_class != PARSE_EXCEPTION:
                raise
            return False
        finally:
            self.scanning -= 1
            (self.lexer.pos, self.ahead, self.last, self.consumed, self.tried, self.literal_props) = saved

    def at(self, kinds) -> bool:
        """Is the next token one of `kinds`? When not, they are remembered as tried here."""
        if self.peek().kind in kinds:
            return True
        self.note(kinds)
        return False

    def note(self, kinds) -> None:
        if self.tried[0] != self.consumed:
            self.tried = (self.consumed, set())
        self.tried[1].update(kinds)

    def error(self, *kinds) -> FilterCompileError:
        self.note(kinds)
        return _parse_error(self.peek(), self.tried[1])

    # selector := or   (no end-of-input check: the rest of the text is left unread)
    def selector(self) -> Node:
        return self.as_boolean(self.or_expr())

    def as_boolean(self, node: Node) -> Node:
        if node.boolean:
            return node
        if isinstance(node, Prop):
            return BoolCast(node)
        self.refuse(PARSE_EXCEPTION, f"Expression will not result in a boolean value: {node}")
        return node

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.at(LOOPS["or"]):
            self.take()
            right = self.and_expr()
            left = Logic("OR", self.as_boolean(left), self.as_boolean(right))
        return left

    def and_expr(self) -> Node:
        left = self.equality()
        while self.at(LOOPS["and"]):
            self.take()
            right = self.equality()
            left = Logic("AND", self.as_boolean(left), self.as_boolean(right))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while self.at(LOOPS["equality"]):
            kind = self.peek().kind
            if kind in ("=", "<>"):
                self.take()
                right = self.comparison()
                left = self.equal(left, right) if kind == "=" else Not(self.equal(left, right))
            elif kind == "IS":
                if self.peek(1).kind == "NULL":
                    self.take(), self.take()
                    left = Equal(left, Const(None))
                else:
                    self.take(), self.take("NOT"), self.take("NULL")
                    left = Not(Equal(left, Const(None)))
        return left

    def comparison(self) -> Node:
        left = self.unary()
        while self.at(LOOPS["comparison"]):
            kind = self.peek().kind
            if kind in (">", ">=", "<", "<="):
                self.take()
                left = self.order(kind, left, self.unary())
            elif kind == "BETWEEN" or (kind == "NOT" and self.peek(1).kind == "BETWEEN"):
                negated = kind == "NOT"
                self.take(), negated and self.take()
                low = self.unary()
                self.take("AND")
                high = self.unary()
                left = self.between(left, low, high, negated)
            elif kind == "IN" or (kind == "NOT" and self.peek(1).kind == "IN"):
                negated = kind == "NOT"
                self.take(), negated and self.take()
                self.take("(")
                values = [self.string()]
                while self.at(LOOPS["in"]):
                    self.take()
                    values.append(self.string())
                self.take(")")
                if not isinstance(left, Prop):
                    self.refuse(RUNTIME, f"Expected a property for In expression, got: {left}")
                left = In(left, values, negated)
            else:                        # NOT enters the loop, then matches none of its NOT choices
                raise self.error(*LOOPS["comparison"])
        return left

    def unary(self) -> Node:
        kind = self.peek().kind
        if kind == "+":
            if not self.scanning and not self.plus_operand_follows():     # (an outer scan covers a nested +)
                raise self.error(*FIRST_UNARY)           # the "+" itself is what does not fit
            self.take()
            return self.unary()
        if kind == "-":
            self.take()
            return Negate(self.unary())
        if kind == "NOT":
            self.take()
            return Not(self.as_boolean(self.unary()))
        return self.primary()

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind == "STRING":
            return Const(self.string())
        if tok.kind == "DECIMAL":
            return Const(self.literal(_integer, self.take().text))
        if tok.kind == "FLOAT":
            return Const(self.literal(_decimal, self.take().text))
        if tok.kind in ("TRUE", "FALSE", "NULL"):
            self.take()
            return Const({"TRUE": True, "FALSE": False, "NULL": None}[tok.kind])
        if tok.kind == "ID":
            return Prop(self.take().text)
        if tok.kind == "(":
            self.take()
            node = self.or_expr()
            self.take(")")
            return node
        raise self.error(*FIRST_UNARY)

    def string(self) -> str:
        return self.take("STRING").text[1:-1].replace("''", "'")

    # the compile-time checks of ComparisonExpression
    def equal(self, left: Node, right: Node) -> Node:
        for side in (left, right):
            if isinstance(side, Const) and side.value is None:
                self.refuse(RUNTIME, f"'{side}' cannot be compared.")
        if isinstance(left, Const) and isinstance(right, Const) and left.boolean and not right.boolean:
            self.refuse(RUNTIME, f"'{left}' cannot be compared with '{right}'")
        self._note_int_literal(left, right)
        return Equal(left, right)

    def order(self, op: str, left: Node, right: Node) -> Node:
        for side in (left, right):
            if (isinstance(side, Const) and (isinstance(side.value, bool) or not isinstance(side.value, (int, float)))) \
                    or (not isinstance(side, Const) and side.boolean):
                self.refuse(RUNTIME, f"Value '{side}' cannot be compared.")
        self._note_int_literal(left, right)
        return Order(op, left, right)

    def between(self, value: Node, low: Node, high: Node, negated: bool) -> Node:
        if negated:
            return Logic("OR", self.order("<", value, low), self.order(">", value, high))
        if isinstance(low, Const) and isinstance(high, Const) and not self.scanning:
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
        if self.scanning:
            return
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
    quirks: list[str] = field(default_factory=list)

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
        return Sql92Filter(text, root, text[:end].strip(), _quirks(text, end, parser, root))
    except RecursionError:          # Java's parser overflows its stack too, and says so
        raise FilterCompileError("java.lang.StackOverflowError", "null") from None


def _quirks(text: str, end: int, parser: _Parser, root: Node) -> list[str]:
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
