"""The properties string of a commitlog record: key 0x01 value 0x02 key 0x01 value ...

MessageDecoder.string2messageProperties keeps a piece only if it has a non-empty key and
value around its first 0x01; the last duplicate wins; a trailing 0x02 is harmless.
"""
from .codes import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    if not text:
        return props
    for piece in text.split(PROPERTY_SEPARATOR):
        key, sep, value = piece.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            props[key] = value
    return props


def format_properties(props: dict[str, str], trailing_separator: bool = False) -> str:
    """Java's form (no trailing 0x02) unless `trailing_separator` (the C++ client's form)."""
    text = PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )
    if trailing_separator and text:
        text += PROPERTY_SEPARATOR
    return text
