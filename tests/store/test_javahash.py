from mqtool_store.javahash import java_string_hash, string_hash, tags_code


def test_tags_code_vectors():
    assert tags_code("TagA") == 2598919
    assert tags_code("中文") == 646394
    assert tags_code("a😀") == 1866116      # surrogate pair = two UTF-16 units
    assert tags_code("") == 0 and tags_code(None) == 0


def test_ascii_fast_path_matches_utf16():
    for s in ["", "a", "TopicTest#KEY1", "x" * 100, "polygenelubricants"]:
        assert string_hash(s) == java_string_hash(s)
    assert java_string_hash("polygenelubricants") == -2147483648
