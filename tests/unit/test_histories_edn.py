"""The EDN reader: tricky input, and errors that say where."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from histories import EdnError
from histories.edn import Symbol, iter_edn, loads_edn


def test_nested_collections_and_scalars() -> None:
    text = """
    ; a Jepsen-ish op, with comments, commas and every kind of scalar
    {:type :ok, :f :txn,   ; trailing comment
     :value [[:send 5 [3 7]] [:poll {5 [[1 2] [2 -3]], "k" []}]],
     :set #{1 2 :a}, :list (1 (2 (3))), :nil nil, :yes true, :no false,
     :big 123456789012345678901234567890N, :neg -7, :hex 0x1F, :plus +4,
     :float 1.5e3, :dec 2.50M, :ratio 3/4, :sym jepsen.nemesis/partition,
     :ns-kw :jepsen.history/op, :chars [\\a \\newline \\u00e9 \\space]
     #_ :discarded #_ {:also "gone"}
     [1 2] :vector-key}
    """
    value = loads_edn(text)
    assert value["type"] == "ok" and value["f"] == "txn"
    assert value["value"] == [["send", 5, [3, 7]], ["poll", {5: [[1, 2], [2, -3]], "k": []}]]
    assert value["set"] == frozenset({1, 2, "a"})
    assert value["list"] == [1, [2, [3]]]
    assert (value["nil"], value["yes"], value["no"]) == (None, True, False)
    assert value["big"] == 123456789012345678901234567890
    assert (value["neg"], value["hex"], value["plus"]) == (-7, 31, 4)
    assert value["float"] == 1500.0 and value["dec"] == Decimal("2.50")
    assert value["ratio"] == Fraction(3, 4)
    assert value["sym"] == Symbol("jepsen.nemesis/partition")
    assert isinstance(value["sym"], Symbol)
    assert value["ns-kw"] == "jepsen.history/op"
    assert value["chars"] == ["a", "\n", "é", " "]
    assert value[(1, 2)] == "vector-key"
    assert "discarded" not in value and "also" not in str(value)


def test_strings_with_escapes() -> None:
    assert loads_edn(r'"tab\there \"quoted\" back\\slash \u00e9 nl\n"') == (
        'tab\there "quoted" back\\slash é nl\n'
    )
    assert loads_edn('"multi\nline; not a comment, {not a map}"') == (
        "multi\nline; not a comment, {not a map}"
    )


def test_tagged_literals_become_their_value_unless_handled() -> None:
    text = '#jepsen.history.Op{:index 0, :type :invoke} #inst "2024-01-02T03:04:05Z" #object[Foo 0x1 "x"]'
    assert list(iter_edn(text)) == [
        {"index": 0, "type": "invoke"},
        "2024-01-02T03:04:05Z",
        [Symbol("Foo"), 1, "x"],
    ]
    handled = list(iter_edn(text, tag_handlers={"inst": lambda v: ("instant", v)}))
    assert handled[1] == ("instant", "2024-01-02T03:04:05Z")
    tagged = list(iter_edn("#a #b 1", default_tag=lambda tag, v: [tag, v]))
    assert tagged == [["a", ["b", 1]]]


def test_top_level_vector_can_be_streamed() -> None:
    assert list(iter_edn("[{:a 1} {:b 2}] 3", unwrap_vector=True)) == [{"a": 1}, {"b": 2}, 3]
    assert list(iter_edn("[] [1]", unwrap_vector=True)) == [1]
    assert list(iter_edn("[{:a 1} {:b 2}]")) == [[{"a": 1}, {"b": 2}]]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('{:a 1\n :b "x"', 1, 1, "map opened with '{' is never closed"),
        ("[1 2\n 3)", 2, 3, "')' closes the vector opened at line 1, column 1"),
        ('[1\n  "abc]', 2, 3, "string is never closed"),
        ("{:a 1\n :b}", 1, 1, "map literal has an odd number of forms (3)"),
        ("{:a 1 :a 2}", 1, 1, "map literal has the key 'a' twice"),
        ("#{1 1}", 1, 1, "set literal has a duplicate element"),
        ("[1 2]\n]", 2, 1, "unmatched ']'"),
        ("[:ok\n  :: ]", 2, 3, "invalid keyword '::'"),
        ("[1 08]", 1, 4, "invalid number '08'"),
        ("[1 2x]", 1, 4, "invalid number '2x'"),
        ('["a\\qb"]', 1, 4, "invalid escape \\q"),
        ("[#_]", 1, 2, "#_ is not followed by a form before ']'"),
        ("[1 #foo]", 1, 4, "#foo is not followed by a form"),
        ('#"regex"', 1, 1, "unsupported dispatch '#' followed by '\"'"),
        ("1 2", 1, 3, "more than one top-level form"),
        ("  ; only a comment\n", 2, 1, "no form"),
        ("3/0", 1, 1, "divides by zero"),
    ],
)
def test_errors_give_line_and_column(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(EdnError) as caught:
        loads_edn(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert message in caught.value.message
    assert str(caught.value).startswith(f"line {line}, column {column}: ")
