"""Every test vector of the SQL92 spec (shared/spec/sql92.md section 5, each [ran] on the 4.9.8
classes), pasted as the spec has them and read by a small table parser, so a row can be checked
against the spec by eye; plus properties of the three-valued logic under NULL (hypothesis)."""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool.common.sql92 import FilterCompileError, compile_sql92
from mqtool.common.sql92values import JavaError

# | # | expression | properties | result |   -- `\n` in an expression or a value is a newline
VECTORS = r"""
| 1 | `a = 'abc'` | a:"abc" | true |
| 2 | `a = 'abc'` | — | null |
| 3 | `a <> 'abc'` | a:"xyz" | true |
| 4 | `'abc' = a` | — | false |
| 5 | `'abc' <> a` | — | true |
| 6 | `a = 'it''s'` | a:"it's" | true |
| 7 | `a = ''''` | a:"'" | true |
| 8 | `a = ''` | a:"" | true |
| 9 | `a != 'abc'` | a:"xyz" | CE TokenMgrError: Lexical error at line 1, column 3. Encountered: "!" (33) |
| 10 | `a == 'abc'` | a:"abc" | CE ParseException: Encountered " "=" "= "" at line 1, column 4. |
| 11 | `a = "abc"` | a:"abc" | CE TokenMgrError: Lexical error at line 1, column 5. Encountered: "\"" (34) |
| 12 | `a = 'abc` | a:"abc" | CE TokenMgrError: Lexical error at line 1, column 9. Encountered: <EOF> after : "\'abc" |
| 13 | `a = 'line1\nline2'` | a:"line1\nline2" | true |
| 14 | `a > 5` | a:"10" | true |
| 15 | `a > 5` | a:"abc" | EXC NFE "abc" |
| 16 | `a > 5` | a:"1.5" | EXC NFE "1.5" |
| 17 | `a > 5` | — | null |
| 18 | `a > 5` | a:" 10" | EXC NFE " 10" |
| 19 | `a > 5` | a:"+10" | true |
| 20 | `a > 5` | a:"2147483648" | EXC NFE "2147483648" |
| 21 | `a > 5.0` | a:" 10 " | true |
| 22 | `a > 5.0` | a:"NaN" | true |
| 23 | `a > 5.0` | a:"7d" | true |
| 24 | `a = 10` | a:"10.0" | EXC NFE "10.0" |
| 25 | `a = 10.0` | a:"10" | true |
| 26 | `a = '10'` | a:"10.0" | false |
| 27 | `a > '5'` | a:"10" | CE Value ''5'' cannot be compared. |
| 28 | `a > -5` | a:"-3" | true |
| 29 | `a = 2147483648` | a:"2147483648" | true |
| 30 | `a = 9223372036854775807` | a:"9223372036854775807" | true |
| 31 | `a = 9223372036854775808` | a:"9223372036854775808" | CE NumberFormatException: For input string: "9223372036854775808" |
| 32 | `a = -9223372036854775808` | a:"-9223372036854775808" | CE NumberFormatException: For input string: "9223372036854775808" |
| 33 | `a > 1E3` | a:"1500" | true |
| 34 | `a > 0.0` | a:"1" | CE 0.0 is less than 4.9E-324 |
| 35 | `a > 1e400` | a:"1" | CE 1e400 is greater than 1.7976931348623157E308 |
| 36 | `a > -1.5` | a:"-1" | true |
| 37 | `a > 0x10` | a:"17" | true |
| 38 | `5 < a` | a:"10" | true |
| 39 | `a > b` | a:"10", b:"9" | true |
| 40 | `a > b` | a:"abc", b:"abd" | EXC "It's illegal to compare string by '>=', '>', '<', '<='. lv=abc, rv=abd" |
| 41 | `a = b` | a:"10", b:"10.0" | false |
| 42 | `a = b` | a:"x" | false |
| 43 | `a = b` | b:"x" | null |
| 44 | `1 = 1.0` | — | true |
| 45 | `a >= 5` | a:"5" | true |
| 46 | `a <= 5` | a:"5" | true |
| 47 | `a < 5` | a:"4" | true |
| 48 | `a <> 5` | a:"5" | false |
| 49 | `-a < 0` | a:"5" | null |
| 50 | `a = b` | — | true |
| 51 | `a = 010` | a:"0" | true |
| 52 | `a BETWEEN 1 AND 10` | a:"1" | true |
| 53 | `a BETWEEN 1 AND 10` | — | null |
| 54 | `a BETWEEN 1 AND 2.5` | a:"2.5" | EXC NFE "2.5" |
| 55 | `a NOT BETWEEN 1 AND 10` | a:"0" | true |
| 56 | `a NOT BETWEEN 1 AND 10` | — | null |
| 57 | `a BETWEEN 10 AND 1` | a:"5" | CE Illegal values of between, left value(10) must less than or equal to right value(1) |
| 58 | `a BETWEEN 'a' AND 'z'` | a:"m" | CE Value ''a'' cannot be compared. |
| 59 | `a BETWEEN b AND 10` | a:"5", b:"1" | true |
| 60 | `a BETWEEN 1 AND 10 AND b = 'x'` | a:"5", b:"x" | true |
| 61 | `a IN ('x', 'y')` | a:"x" | true |
| 62 | `a IN ('x', 'y')` | — | null |
| 63 | `a NOT IN ('x', 'y')` | a:"z" | true |
| 64 | `a NOT IN ('x', 'y')` | — | null |
| 65 | `a IN (1, 2)` | a:"1" | CE ParseException: Encountered " <DECIMAL_LITERAL> "1 "" at line 1, column 7. |
| 66 | `a IN ()` | a:"1" | CE ParseException: Encountered " ")" ") "" at line 1, column 7. |
| 67 | `'x' IN ('x')` | — | CE Expected a property for In expression, got: 'x' |
| 68 | `a IS NULL` | — | true |
| 69 | `a IS NULL` | a:"" | false |
| 70 | `a IS NOT NULL` | a:"" | true |
| 71 | `a = NULL` | — | CE 'NULL' cannot be compared. |
| 72 | `NULL IS NULL` | — | true |
| 73 | `NULL` | — | null |
| 74 | `a = TRUE` | a:"true" | true |
| 75 | `a = TRUE` | a:"1" | false |
| 76 | `a = FALSE` | a:"abc" | true |
| 77 | `a = TRUE` | — | null |
| 78 | `a` | a:"true" | false |
| 79 | `TRUE` | — | true |
| 80 | `TRUE = 'x'` | — | CE 'TRUE' cannot be compared with ''x'' |
| 81 | `a > TRUE` | a:"1" | CE Value 'TRUE' cannot be compared. |
| 82 | `'abc'` | — | CE ParseException: Expression will not result in a boolean value: 'abc' |
| 83 | `TRUE = a` | a:"true" | EXC ClassCastException |
| 84 | `1 = TRUE` | — | false |
| 85 | `a > 5 AND b > 5` | a:"10" | null |
| 86 | `a > 5 OR b > 5` | a:"10" | true |
| 87 | `NOT (a > 5)` | — | null |
| 88 | `NOT (a > 5)` | a:"1" | true |
| 89 | `NOT a > 5` | a:"1" | CE Value '(NOT a)' cannot be compared. |
| 90 | `NOT a = 'x'` | a:"x" | EXC ClassCastException |
| 91 | `a > 5 OR b > 5 AND c > 5` | a:"10", b:"1", c:"1" | true |
| 92 | `(a > 5 OR b > 5) AND c > 5` | a:"10", b:"1", c:"1" | false |
| 93 | `a = 1 OR a = 'x'` | a:"x" | EXC NFE "x" |
| 94 | `a = 'x' OR a = 1` | a:"x" | true |
| 95 | `a IS NULL OR a > 5` | — | true |
| 96 | `a IS NOT NULL AND a > 5` | a:"abc" | EXC NFE "abc" |
| 97 | `NOT (a = b)` | a:"x" | true |
| 98 | `NOT ('x' = a)` | — | true |
| 99 | `a > 5 > 3` | a:"9" | CE Value '(a > 5)' cannot be compared. |
| 100 | `a = 'x' = TRUE` | a:"x" | true |
| 101 | `a between 1 and 10 or b is not null` | a:"5" | true |
| 102 | `A = 'x'` | a:"x" | null |
| 103 | `TAGS = 'TagA'` | TAGS:"TagA" | true |
| 104 | `_a1$ = 'x'` | _a1$:"x" | true |
| 105 | `1a = 'x'` | 1a:"x" | CE ParseException: Expression will not result in a boolean value: 1 |
| 106 | `a.b = 'x'` | a.b:"x" | CE TokenMgrError: Lexical error at line 1, column 3. Encountered: "b" (98), after : "." |
| 107 | `a-b = 'x'` | a-b:"x" | null |
| 108 | `not = 'x'` | not:"x" | CE ParseException: Encountered " "=" "= "" at line 1, column 5. |
| 109 | `like = 'x'` | like:"x" | true |
| 110 | `a='x'AND b='y'` | a:"x", b:"y" | true |
| 111 | `/* c */ a = 'x' -- tail\n` | a:"x" | true |
| 112 | `a = 'x' -- tail` | a:"x" | true |
| 113 | `a = 'x' b = 'y'` | a:"x" | true |
| 114 | `a = 'x' )` | a:"x" | true |
| 115 | `a = 'x' AND` | a:"x" | CE ParseException: Encountered "<EOF>" at line 1, column 11. |
| 116 | `a LIKE 'x%'` | a:"xyz" | false |
| 117 | `a CONTAINS 'x'` | a:"xyz" | false |
| 118 | `a STARTSWITH 'x'` | a:"xyz" | false |
| 119 | `a = 'x' ; DROP` | a:"x" | CE TokenMgrError: Lexical error at line 1, column 9. Encountered: ";" (59) |
| 120 | `` | — | CE ParseException: Encountered "<EOF>" at line 0, column 0. |
| 121 | `a = 'x' &&  b = 'y'` | a:"x" | CE TokenMgrError: Lexical error at line 1, column 9. Encountered: "&" (38) |
| 122 | `a = 'x' \|\| b = 'y'` | a:"x" | CE TokenMgrError: Lexical error at line 1, column 9. Encountered: "\|" (124) |
| 123 | `a IS NULL NULL` | — | true |
"""

_PROP = re.compile(r'([^\s,:]+):"((?:[^"\\]|\\.)*)"')


def _rows():
    for line in VECTORS.strip().splitlines():
        cells = [c.strip() for c in line.replace(r"\|", "\x00").strip("|").split(" | ")]
        num, expr, props, result = (c.replace("\x00", "|") for c in cells)
        expr = expr[1:-1].replace(r"\n", "\n")              # between the backquotes
        values = {} if props == "—" else {k: v.replace(r"\n", "\n") for k, v in _PROP.findall(props)}
        yield pytest.param(expr, values, result, id=f"v{num}")


def test_the_table_has_every_vector():
    assert [p.id for p in _rows()] == [f"v{n}" for n in range(1, 124)]


@pytest.mark.parametrize("expr, props, result", list(_rows()))
def test_vector(expr, props, result):
    if result.startswith("CE"):
        with pytest.raises(FilterCompileError) as info:
            compile_sql92(expr)
        want = result[2:].strip()
        short_class, sep, message = want.partition(": ")
        if sep and "." not in short_class and " " not in short_class:      # "CE TokenMgrError: ..."
            assert info.value.java_class.rsplit(".", 1)[-1] == short_class
        else:
            message = want
        # byte for byte what the spec's table shows: a ParseException's first line (the rest is in
        # test_sql92_parse_errors.py), a TokenMgrError's start (the table writes JavaCC's
        # ".  Encountered" with one blank), any other message whole
        got = info.value.message
        if short_class == "TokenMgrError":
            assert got.startswith(message.replace(". Encountered", ".  Encountered")), (got, want)
        elif message.startswith("Encountered"):
            assert got.split("\n")[0] == message, (got, want)
        else:
            assert got == message, (got, want)
        return
    f = compile_sql92(expr)
    if result.startswith("EXC"):
        with pytest.raises(JavaError) as info:
            f.evaluate(props)
        want = result[3:].strip()
        if want.startswith("NFE"):
            assert "NumberFormatException" in str(info.value)
            assert f'For input string: {want[3:].strip()}' in str(info.value)
        elif want == "ClassCastException":
            assert info.value.java_class == "java.lang.ClassCastException"
        else:
            assert str(info.value).endswith(want.strip('"')), str(info.value)
        assert f.matches(props) is False                     # an evaluation error skips the message
        return
    expected = {"true": True, "false": False, "null": None}[result]
    assert f.evaluate(props) is expected
    assert f.matches(props) is (expected is True)


# ---------------------------------------------------------------- three-valued logic (hypothesis)

ATOMS = ["a = 'x'", "'x' = a", "a <> 'y'", "a > 5", "a >= 1.5", "a IS NULL", "b IS NOT NULL",
         "b BETWEEN 1 AND 3", "a NOT BETWEEN 2 AND 8", "a IN ('x', '7')", "b NOT IN ('abc')", "a = b",
         "TRUE", "FALSE", "NULL"]
values = st.sampled_from([None, "x", "y", "7", "1.5", "2", "abc", ""])
messages = st.fixed_dictionaries({}, optional={"a": values.filter(bool), "b": values.filter(bool)})


@st.composite
def conditions(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    op = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if op == "NOT":
        return f"NOT ({draw(conditions(depth - 1))})"
    return f"({draw(conditions(depth - 1))}) {op} ({draw(conditions(depth - 1))})"


def outcome(expr, props):
    try:
        return compile_sql92(expr).evaluate(props)
    except JavaError:
        return "error"


def kleene_and(x, y):
    return False if False in (x, y) else None if None in (x, y) else True


def kleene_or(x, y):
    return True if True in (x, y) else None if None in (x, y) else False


@given(conditions(), conditions(), messages)
def test_and_or_are_kleene_logic_with_java_short_circuit(p, q, props):
    x, y = outcome(p, props), outcome(q, props)
    both = outcome(f"({p}) AND ({q})", props)
    either = outcome(f"({p}) OR ({q})", props)
    if x == "error":                                  # the left side is always evaluated first
        assert both == either == "error"
        return
    assert both == (False if x is False else "error" if y == "error" else kleene_and(x, y))
    assert either == (True if x is True else "error" if y == "error" else kleene_or(x, y))
    if y != "error":
        assert outcome(f"({q}) AND ({p})", props) == both          # commutative when nothing throws
        assert outcome(f"({q}) OR ({p})", props) == either
        assert either == outcome(f"NOT (NOT ({p}) AND NOT ({q}))", props)     # De Morgan under NULL


@given(conditions(), messages)
def test_not_and_the_constants(p, props):
    x = outcome(p, props)
    assert outcome(f"NOT ({p})", props) == (x if x in (None, "error") else not x)
    assert outcome(f"NOT (NOT ({p}))", props) == x
    assert outcome(f"FALSE AND ({p})", props) is False                 # the right side is never read
    assert outcome(f"TRUE OR ({p})", props) is True
    assert outcome(f"({p}) AND TRUE", props) == x
    assert outcome(f"({p}) OR FALSE", props) == x
    if x != "error":
        assert outcome(f"({p}) AND NULL", props) == (False if x is False else None)
        assert outcome(f"({p}) OR NULL", props) == (True if x is True else None)
        # never both delivered; exactly one of them when p is not null
        f, g = compile_sql92(p), compile_sql92(f"NOT ({p})")
        assert not (f.matches(props) and g.matches(props))
        assert (f.matches(props) or g.matches(props)) == (x is not None)


@given(conditions(), messages, st.sampled_from([str.lower, str.upper, str.title]), st.sampled_from([" ", "\t", "\n  "]))
def test_keyword_case_and_blanks_do_not_change_the_result(p, props, case, blank):
    words = re.split(r"('[^']*')", p)        # keep the string literals as they are
    text = "".join(w if w.startswith("'") else re.sub(r"\b(AND|OR|NOT|IS|NULL|IN|BETWEEN|TRUE|FALSE)\b",
                                                      lambda m: case(m.group()), w).replace(" ", blank)
                   for w in words)
    assert outcome(text, props) == outcome(p, props)


SQL_CHARS = st.sampled_from(list("abAB_$01259.eE+-'\"=<>!(),;*/ \t\n\r|&%é") +
                            ["AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "--", "/*", "*/"])


@given(st.lists(SQL_CHARS, max_size=40).map("".join), messages)
def test_any_text_compiles_or_is_refused_and_evaluates_or_throws_as_java(text, props):
    """Whatever the text: a FilterCompileError with a Java class, or a filter whose evaluation is
    TRUE, FALSE, null or a JavaError; and the same text gives the same answer twice (the cache)."""
    try:
        f = compile_sql92(text)
    except FilterCompileError as exc:
        assert exc.java_class.startswith(("java.lang.", "org.apache.rocketmq.filter.parser."))
        with pytest.raises(FilterCompileError):
            compile_sql92(text)
        return
    try:
        assert f.evaluate(props) in (True, False, None)
    except JavaError as exc:
        assert exc.java_class.startswith("java.lang.")
    assert text.startswith(f.read_as) or text.strip().startswith(f.read_as)


def test_a_parse_error_lists_what_javacc_expected_there():
    """JavaCC's ParseException text: the tokens tried at the failing token, in token-kind order."""
    with pytest.raises(FilterCompileError) as info:
        compile_sql92("a IN ('x' 'y')")
    assert info.value.message == ('Encountered " <STRING_LITERAL> "\\\'y\\\' "" at line 1, column 11.\n'
                                  'Was expecting one of:\n    "," ...\n    ")" ...\n    ')
    with pytest.raises(FilterCompileError) as info:
        compile_sql92("a IN (1)")
    assert info.value.message.endswith('column 7.\nWas expecting:\n    <STRING_LITERAL> ...\n    ')


@pytest.mark.parametrize("expr, read_as, words", [
    ("a = 'x' b = 'y'", "a = 'x'", "(\"b = 'y'\") is ignored"),
    ("a LIKE 'x%'", "a", "bare property (a) used as a condition is never TRUE"),
    ("a > 0x10", "a > 0", "('x10') is ignored"),
    ("NOT a = 'x'", "NOT a = 'x'", "(NOT a) compared with the text 'x' never matches"),
    ("-a < 0.5", "-a < 0.5", "-a is NULL for every message"),
    ("TRUE = a", "TRUE = a", "TRUE compared with the text a never matches"),
    ("b = 'y' AND a", "b = 'y' AND a", "bare property (a)"),
])
def test_quirks_that_change_the_meaning_are_said(expr, read_as, words):
    f = compile_sql92(expr)
    assert f.read_as == read_as
    assert any(words in note for note in f.quirks), f.quirks


@pytest.mark.parametrize("expr, words", [
    ("a > 0x10", "a is compared with an integer literal, so its value is parsed as a Java int"),
    ("amount BETWEEN 1 AND 2147483648", "parsed as a Java Long"),
    ("region = 'eu' AND amount > 100", "amount is compared with an integer literal"),     # the README's
])
def test_an_integer_literal_is_a_type_note_not_a_different_reading(expr, words):
    """Issue 31: the README's own expression was warned of as 'read as' itself. It reads as written;
    what an integer literal does to a property's type is a note the README gives, not a warning."""
    f = compile_sql92(expr)
    assert any(words in note for note in f.type_notes), f.type_notes
    assert not any("integer literal" in note for note in f.quirks), f.quirks


@pytest.mark.parametrize("expr", ["region = 'eu' AND amount > 100", "a = 'x'", "a > 5.0", "NOT (a = 'x')", "a IS NULL OR a IN ('x')",
                                  "a = 'x' -- a comment without a line end", "TRUE"])
def test_plain_expressions_have_no_quirk(expr):
    assert compile_sql92(expr).quirks == []


def test_a_unary_plus_needs_a_whole_operand_after_it():
    """LOOKAHEAD("+" unaryExpr()): when no operand follows, the error is at the "+" itself."""
    for text in ("a = +", "a = +(b", "a = +)"):
        with pytest.raises(FilterCompileError) as info:
            compile_sql92(text)
        assert info.value.message.startswith('Encountered " "+" "+ "" at line 1, column 5.'), text
    assert compile_sql92("a = + + 5").evaluate({"a": "5"}) is True
    with pytest.raises(FilterCompileError, match="Value ''5'' cannot be compared"):
        compile_sql92("a = +(a > '5')")          # the lookahead checks syntax; the parse then checks the rest


def test_deep_nesting_is_a_compile_error_not_a_crash():
    with pytest.raises(FilterCompileError) as info:
        compile_sql92("(" * 5000 + "a = 'x'" + ")" * 5000)
    assert info.value.java_class == "java.lang.StackOverflowError"
    assert compile_sql92("+" * 200 + "5 = a").evaluate({"a": "5"}) is True      # no blow-up in the scans


def test_long_and_or_chains_evaluate_without_deep_recursion():
    many = " OR ".join(f"a = '{i}'" for i in range(5000))
    f = compile_sql92(many)
    assert f.evaluate({"a": "4999"}) is True and f.evaluate({"a": "x"}) is False and f.evaluate({}) is None
    both = compile_sql92(" AND ".join(["a IS NOT NULL"] * 3000 + ["b > 5"]))
    assert both.evaluate({"a": "1", "b": "7"}) is True and both.matches({"a": "1", "b": "x"}) is False
    assert str(compile_sql92("a = 'x' OR b = 'y' OR c = 'z'").root) == "(((a == 'x') OR (b == 'y')) OR (c == 'z'))"
