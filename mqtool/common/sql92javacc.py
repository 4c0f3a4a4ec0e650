"""The bookkeeping of 4.9.8's generated SelectorParser (JavaCC 5) that decides the "Was expecting"
part of every ParseException a Java broker answers: which token kinds each choice point tried at
the token met (jj_la1 against jj_gen), the kind a failed consume wanted (jj_kind), and the syntactic
lookaheads (LOOKAHEAD(2) before IS NULL, NOT BETWEEN and NOT IN; LOOKAHEAD("+" unaryExpr()) before
a unary plus). The grammar with its actions is sql92.py's parser, on this base.

So a unary "+" is never listed: lookahead chooses it, no choice point records it. JavaCC also
rescans the lookaheads that looked past the error (jj_rescan_token) and adds the token sequences
they tried, but its jj_add_error_token keeps a sequence only when an equal one is listed already (it
compares where it meant to deduplicate); in this grammar a failed lookahead is rescanned only where
its sequences are two tokens long or name a kind not listed, so the rescan never adds a line and is
left out.
"""
from __future__ import annotations

from mqtool.common.sql92lex import IMAGES, KIND_ORDER, PARSE_EXCEPTION, FilterCompileError, Lexer, Token, escape

# jj_la1: the kinds each choice point of the generated parser tests, by its index there
LA1 = (
    ("OR",),                                              # 0 orExpression: ( OR andExpression )*
    ("AND",),                                             # 1 andExpression
    ("IS", "=", "<>"),                                    # 2 equalityExpression's loop
    ("=", "<>"),                                          # 3 ... its choice, before LOOKAHEAD(2) IS NULL
    ("IS",),                                              # 4 ... IS NOT NULL
    ("NOT", "BETWEEN", "IN", ">", ">=", "<", "<="),       # 5 comparisonExpression's loop
    (",",),                                               # 6 IN ( ... , ... )
    (",",),                                               # 7 NOT IN ( ... , ... )
    ("BETWEEN", ">", ">=", "<", "<="),                    # 8 its choice, before LOOKAHEAD(2) NOT BETWEEN
    ("IN",),                                              # 9 ... before LOOKAHEAD(2) NOT IN
    ("NOT", "TRUE", "FALSE", "NULL", "DECIMAL", "FLOAT", "STRING", "ID", "(", "-"),   # 10 unaryExpr
    ("TRUE", "FALSE", "NULL", "DECIMAL", "FLOAT", "STRING", "ID", "("),              # 11 primaryExpr
    ("TRUE", "FALSE", "NULL", "DECIMAL", "FLOAT", "STRING"),                         # 12 literal
)
LITERALS = LA1[12]
# the lookaheads, by their jj_2 index
IS_NULL, NOT_BETWEEN, NOT_IN, PLUS = range(4)
UNBOUNDED = 2147483647          # LOOKAHEAD("+" unaryExpr()): as far as it takes


class _LookaheadSuccess(Exception):
    """A bounded lookahead matched all the tokens it may look at."""


class JavaccParser:
    """Tokens as a chain (index 0 is the empty token before the first); `cur` is the last one
    consumed. Subclasses write the grammar with `ntk`, `consume`, `mark`, `lookahead` and `fail`."""

    def __init__(self, text: str):
        self.lexer = Lexer(text)
        self.tokens: list[Token] = [Token("BOF", "", 0, 0, 0, 0)]
        self.cur = 0
        self.gen = 0                                   # jj_gen: tokens consumed
        self.la1 = [-1] * len(LA1)
        self.la = 0                                    # jj_la: tokens a lookahead may still look at
        self.scanpos = self.lastpos = 0
        self.expected_kind: str | None = None          # jj_kind: the kind a failed consume wanted

    # ---------------------------------------------------------------- the grammar's primitives

    def token(self, i: int) -> Token:
        """The chain's i-th token, lexed when first needed (a lexical error is met only there)."""
        while len(self.tokens) <= i:
            self.tokens.append(self.lexer.next())
        return self.tokens[i]

    @property
    def last(self) -> Token | None:
        return self.tokens[self.cur] if self.cur else None

    def ntk(self) -> str:
        return self.token(self.cur + 1).kind

    def consume(self, kind: str) -> Token:
        tok = self.token(self.cur + 1)
        if tok.kind != kind:
            self.expected_kind = kind
            raise self.parse_error()
        self.cur += 1
        self.gen += 1
        return tok

    def mark(self, index: int) -> None:
        """The choice point `index` tested the next token and took none of its kinds."""
        self.la1[index] = self.gen

    def at(self, index: int, *kinds: str) -> bool:
        """Choice point `index`: is the next token one of `kinds`?"""
        if self.ntk() in kinds:
            return True
        self.mark(index)
        return False

    def fail(self, index: int | None = None) -> FilterCompileError:
        """jj_consume_token(-1): nothing fits here (at choice point `index`, when given)."""
        if index is not None:
            self.mark(index)
        self.expected_kind = None
        return self.parse_error()

    def lookahead(self, index: int, limit: int) -> bool:
        """jj_2_<index + 1>: does the syntactic lookahead match from the next token on?"""
        self.la, self.scanpos, self.lastpos = limit, self.cur, self.cur
        try:
            return not (self._scan_is_null, self._scan_not_between, self._scan_not_in, self._scan_plus)[index]()
        except _LookaheadSuccess:
            return True

    # ---------------------------------------------------------------- the syntactic lookahead
    # Each scan returns True when the tokens do not fit (as the generated jj_3 routines do).

    def scan_token(self, kind: str) -> bool:
        if self.scanpos == self.lastpos:
            self.la -= 1
            self.scanpos = self.lastpos = self.scanpos + 1
        else:
            self.scanpos += 1
        if self.token(self.scanpos).kind != kind:
            return True
        if self.la == 0 and self.scanpos == self.lastpos:
            raise _LookaheadSuccess
        return False

    def _first_of(self, *alternatives) -> bool:
        """The first alternative that fits; True when none does."""
        start = self.scanpos
        for alt in alternatives:
            if not alt():
                return False
            self.scanpos = start
        return True

    def _repeat(self, part) -> None:
        while True:
            start = self.scanpos
            if part():
                self.scanpos = start
                return

    def _tokens(self, *kinds) -> bool:
        return any(self.scan_token(k) for k in kinds)

    def _scan_is_null(self) -> bool:
        return self._tokens("IS", "NULL")

    def _scan_not_between(self) -> bool:
        return self._tokens("NOT", "BETWEEN") or self._scan_between_bounds()

    def _scan_between_bounds(self) -> bool:
        return self._scan_unary() or self.scan_token("AND") or self._scan_unary()

    def _scan_not_in(self) -> bool:
        return self.scan_token("NOT") or self._scan_in_list()

    def _scan_in_list(self) -> bool:
        if self._tokens("IN", "(", "STRING"):
            return True
        self._repeat(lambda: self._tokens(",", "STRING"))
        return self.scan_token(")")

    def _scan_plus(self) -> bool:
        return self.scan_token("+") or self._scan_unary()

    def _scan_unary(self) -> bool:
        return self._first_of(self._scan_plus, lambda: self.scan_token("-") or self._scan_unary(),
                              lambda: self.scan_token("NOT") or self._scan_unary(), self._scan_primary)

    def _scan_primary(self) -> bool:
        return self._first_of(lambda: self._first_of(*(lambda k=k: self.scan_token(k) for k in
                                                       ("STRING", "DECIMAL", "FLOAT", "TRUE", "FALSE", "NULL"))),
                              lambda: self.scan_token("ID"),
                              lambda: self.scan_token("(") or self._scan_or() or self.scan_token(")"))

    def _scan_or(self) -> bool:
        if self._scan_and():
            return True
        self._repeat(lambda: self.scan_token("OR") or self._scan_and())
        return False

    def _scan_and(self) -> bool:
        if self._scan_equality():
            return True
        self._repeat(lambda: self.scan_token("AND") or self._scan_equality())
        return False

    def _scan_equality(self) -> bool:
        if self._scan_comparison():
            return True
        self._repeat(lambda: self._first_of(lambda: self.scan_token("=") or self._scan_comparison(),
                                            lambda: self.scan_token("<>") or self._scan_comparison(),
                                            self._scan_is_null, lambda: self._tokens("IS", "NOT", "NULL")))
        return False

    def _scan_comparison(self) -> bool:
        if self._scan_unary():
            return True
        self._repeat(lambda: self._first_of(
            *(lambda op=op: self.scan_token(op) or self._scan_unary() for op in (">", ">=", "<", "<=")),
            lambda: self.scan_token("BETWEEN") or self._scan_between_bounds(),
            self._scan_not_between, self._scan_in_list, self._scan_not_in))
        return False

    # ---------------------------------------------------------------- ParseException

    def parse_error(self) -> FilterCompileError:
        """generateParseException and ParseException.initialise (Linux's "\\n" line separator): the
        token met, then every kind the choice points tried at it and the one a failed consume wanted."""
        kinds = {self.expected_kind} if self.expected_kind else set()
        self.expected_kind = None
        for index, gen in enumerate(self.la1):
            if gen == self.gen:
                kinds.update(LA1[index])
        tok = self.token(self.cur + 1)
        seen = IMAGES["EOF"] if tok.kind == "EOF" else f' {IMAGES[tok.kind]} "{escape(tok.text)} "'
        head = "Was expecting:" if len(kinds) == 1 else "Was expecting one of:"
        listed = "".join(f"{IMAGES[k]} ...\n    " for k in sorted(kinds, key=KIND_ORDER.index))
        return FilterCompileError(PARSE_EXCEPTION, f'Encountered "{seen}" at line {tok.line}, column {tok.column}.\n'
                                                   f"{head}\n    {listed}")
