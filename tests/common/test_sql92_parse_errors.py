"""ParseException texts whole, as 4.9.8's generated SelectorParser (JavaCC 5) builds them: the token
met, then every token kind a choice point tried there (jj_la1 at that jj_gen) and the one a failed
consume wanted, in token-kind order. Where a LOOKAHEAD chose, the text says less than the grammar
allows: a unary "+" is never listed, `a IS` expects only NOT, `a NOT 5` does not list NOT.
The first line of each spec vector (shared/spec/sql92.md section 5) is [ran]; the rest follows
from the generated parser's tables, read from its source."""
from __future__ import annotations

import pytest

from mqtool.common.sql92 import FilterCompileError, compile_sql92

UNARY = ['"NOT"', '"TRUE"', '"FALSE"', '"NULL"', "<DECIMAL_LITERAL>", "<FLOATING_POINT_LITERAL>", "<STRING_LITERAL>",
         "<ID>", '"("', '"-"']                        # unaryExpr's choices ("+" goes by lookahead)
COMPARISON = ['"BETWEEN"', '"IN"', '">"', '">="', '"<"', '"<="']     # what may follow NOT, and the rest
AFTER_OPERAND = ['"NOT"', '"AND"', '"OR"', '"BETWEEN"', '"IN"', '"IS"', '"="', '"<>"', '">"', '">="', '"<"', '"<="']


def expecting(*images: str) -> str:
    head = "Was expecting:" if len(images) == 1 else "Was expecting one of:"
    return head + "\n    " + "".join(f"{i} ...\n    " for i in images)


# (spec vector or None, expression, first line, what it expected)
ROWS = [
    (10, "a == 'abc'", 'Encountered " "=" "= "" at line 1, column 4.', expecting(*UNARY)),
    (65, "a IN (1, 2)", 'Encountered " <DECIMAL_LITERAL> "1 "" at line 1, column 7.', expecting("<STRING_LITERAL>")),
    (66, "a IN ()", 'Encountered " ")" ") "" at line 1, column 7.', expecting("<STRING_LITERAL>")),
    (108, "not = 'x'", 'Encountered " "=" "= "" at line 1, column 5.', expecting(*UNARY)),
    (115, "a = 'x' AND", 'Encountered "<EOF>" at line 1, column 11.', expecting(*UNARY)),
    (120, "", 'Encountered "<EOF>" at line 0, column 0.', expecting(*UNARY)),
    (None, "+", 'Encountered " "+" "+ "" at line 1, column 1.', expecting(*UNARY)),
    (None, "a > + ", 'Encountered " "+" "+ "" at line 1, column 5.', expecting(*UNARY)),
    (None, "- =", 'Encountered " "=" "= "" at line 1, column 3.', expecting(*UNARY)),
    (None, "a =\n\t=", 'Encountered " "=" "= "" at line 2, column 9.', expecting(*UNARY)),
    (None, "a BETWEEN 1 AND", 'Encountered "<EOF>" at line 1, column 15.', expecting(*UNARY)),
    (None, "a NOT 5", 'Encountered " "NOT" "NOT "" at line 1, column 3.', expecting(*COMPARISON)),
    (None, "TRUE NOT", 'Encountered " "NOT" "NOT "" at line 1, column 6.', expecting(*COMPARISON)),
    (None, "a NOT", 'Encountered " "NOT" "NOT "" at line 1, column 3.', expecting(*COMPARISON)),
    (None, "a IS", 'Encountered "<EOF>" at line 1, column 4.', expecting('"NOT"')),
    (None, "a IS 5", 'Encountered " <DECIMAL_LITERAL> "5 "" at line 1, column 6.', expecting('"NOT"')),
    (None, "a IS NOT 5", 'Encountered " <DECIMAL_LITERAL> "5 "" at line 1, column 10.', expecting('"NULL"')),
    (None, "a BETWEEN 1 5", 'Encountered " <DECIMAL_LITERAL> "5 "" at line 1, column 13.', expecting('"AND"')),
    (None, "a NOT BETWEEN 1", 'Encountered "<EOF>" at line 1, column 15.', expecting('"AND"')),
    (None, "a NOT IN 'x'", 'Encountered " <STRING_LITERAL> "\\\'x\\\' "" at line 1, column 10.', expecting('"("')),
    (None, "a IN ('x' 'y')", 'Encountered " <STRING_LITERAL> "\\\'y\\\' "" at line 1, column 11.',
     expecting('","', '")"')),
    (None, "a NOT IN ('x'", 'Encountered "<EOF>" at line 1, column 13.', expecting('","', '")"')),
    (None, "(a = 'x'", 'Encountered "<EOF>" at line 1, column 8.', expecting(*AFTER_OPERAND, '")"')),
    (None, "a = 'x' AND (b", 'Encountered "<EOF>" at line 1, column 14.', expecting(*AFTER_OPERAND, '")"')),
]


@pytest.mark.parametrize("vector, expr, first, rest", ROWS, ids=[f"v{v}" if v else repr(r[1]) for v, *r in ROWS])
def test_the_whole_parse_exception_text(vector, expr, first, rest):
    with pytest.raises(FilterCompileError) as info:
        compile_sql92(expr)
    assert info.value.java_class == "org.apache.rocketmq.filter.parser.ParseException"
    assert info.value.message == f"{first}\n{rest}"


def test_the_format_one_row_written_out():
    """ParseException.initialise's layout, without the helper: a line per kind, each "    IMAGE ...",
    and the text ends with the four blanks after the last line end."""
    with pytest.raises(FilterCompileError) as info:
        compile_sql92("a == 'abc'")
    assert str(info.value) == (
        'org.apache.rocketmq.filter.parser.ParseException: Encountered " "=" "= "" at line 1, column 4.\n'
        'Was expecting one of:\n'
        '    "NOT" ...\n'
        '    "TRUE" ...\n'
        '    "FALSE" ...\n'
        '    "NULL" ...\n'
        '    <DECIMAL_LITERAL> ...\n'
        '    <FLOATING_POINT_LITERAL> ...\n'
        '    <STRING_LITERAL> ...\n'
        '    <ID> ...\n'
        '    "(" ...\n'
        '    "-" ...\n'
        '    ')


@pytest.mark.parametrize("vector, expr, text", [
    (82, "'abc'", "Expression will not result in a boolean value: 'abc'"),
    (105, "1a = 'x'", "Expression will not result in a boolean value: 1"),
])
def test_the_boolean_check_is_a_parse_exception_of_one_line(vector, expr, text):
    with pytest.raises(FilterCompileError) as info:
        compile_sql92(expr)
    assert (info.value.java_class, info.value.message) == ("org.apache.rocketmq.filter.parser.ParseException", text)
