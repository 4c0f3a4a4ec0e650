"""The SQL92 selector's tokens as 4.9.8's JavaCC token manager makes them (SelectorParser.jj's
TOKEN and SKIP sections, SelectorParserTokenManager): kinds, their images in ParseException texts,
lexical errors as TokenMgrError words them. Pure; sql92.py parses what this yields."""
from __future__ import annotations

import re
from dataclasses import dataclass

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


def escape(text: str) -> str:
    """JavaCC's addEscapes."""
    out = []
    for ch in text:
        code = ord(ch)
        special = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "'": "\\'",
                   "\\": "\\\\"}.get(ch)
        out.append(special or (f"\\u{code:04x}" if code < 0x20 or code > 0x7E else ch))
    return "".join(out)


class Lexer:
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
        after = escape(text[p:dead])
        if dead >= len(text):            # after the last character (on the next line after a line end)
            line, col = self.lines[-1], self.cols[-1] + 1
            if text[-1] in "\r\n":
                line, col = line + 1, 0
            msg = f"Lexical error at line {line}, column {col}.  Encountered: <EOF> after : \"{after}\""
        else:
            ch = text[dead]
            line, col = self.lines[dead], self.cols[dead]
            msg = (f"Lexical error at line {line}, column {col}.  Encountered: \"{escape(ch)}\" ({ord(ch)}), "
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
