"""`--select` expressions: every operator, lists, case, numbers, and malformed input."""

from __future__ import annotations

from typing import Any

import pytest

from providers import selectors
from providers.core.errors import UsageError
from providers.models import InstanceTypeSpec, Selector, selector_record

GPU_BOX = selector_record(
    InstanceTypeSpec(
        name="p5.48xlarge",
        vcpus=192,
        memory_gib=2048,
        arch="x86_64",
        gpu="H100",
        gpu_count=8,
        gpu_memory_gib=80,
        region="us-east-1",
    ),
    provider="aws",
    price=98.32,
)
SMALL_ARM = selector_record(
    InstanceTypeSpec(name="m7g.large", vcpus=2, memory_gib=8, arch="arm64", region="eu-west-1"),
    provider="aws",
    price=0.08,
)
NINE = selector_record(
    InstanceTypeSpec(name="10", vcpus=9, memory_gib=16, arch="x86_64"), provider="local"
)
RECORDS = [GPU_BOX, SMALL_ARM, NINE]


def chosen(*expressions: str) -> list[str]:
    parsed = selectors.parse(expressions)
    return [r["name"] for r in RECORDS if selectors.matches(parsed, r)]


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("vcpus=2", ["m7g.large"]),
        ("vcpus==192", ["p5.48xlarge"]),
        ("vcpus!=2", ["p5.48xlarge", "10"]),
        ("vcpus>9", ["p5.48xlarge"]),
        ("vcpus>=9", ["p5.48xlarge", "10"]),
        ("vcpus<9", ["m7g.large"]),
        ("vcpus<=9", ["m7g.large", "10"]),
        ("vcpus >= 100", ["p5.48xlarge"]),
        ("arch in (arm64,aarch64)", ["m7g.large"]),
        ("arch notin (arm64,aarch64)", ["p5.48xlarge", "10"]),
        ("vcpus in (2, 9)", ["m7g.large", "10"]),
        ("vcpus notin (2)", ["p5.48xlarge", "10"]),
        ("gpu", ["p5.48xlarge"]),
        ("!gpu", ["m7g.large", "10"]),
        ("region", ["p5.48xlarge", "m7g.large"]),
        ("!region", ["10"]),
        ("price<1", ["m7g.large"]),
        ("gpu_memory_gib>=80", ["p5.48xlarge"]),
    ],
)
def test_operators(expression: str, names: list[str]) -> None:
    assert chosen(expression) == names


def test_absent_key_passes_not_equal_and_notin_but_fails_everything_else() -> None:
    assert chosen("gpu!=H100") == ["m7g.large", "10"]
    assert chosen("gpu notin (H100,A100)") == ["m7g.large", "10"]
    assert chosen("gpu=H100") == ["p5.48xlarge"]
    assert chosen("price>=0") == ["p5.48xlarge", "m7g.large"]
    assert chosen("price<1000") == ["p5.48xlarge", "m7g.large"]


def test_string_match_ignores_case_of_value_and_key() -> None:
    assert chosen("gpu=h100") == ["p5.48xlarge"]
    assert chosen("gpu in (a100,h100)") == ["p5.48xlarge"]
    assert chosen("ARCH=ARM64") == ["m7g.large"]
    assert chosen("name=P5.48XLARGE") == ["p5.48xlarge"]
    assert chosen("!GPU") == ["m7g.large", "10"]


def test_numeric_keys_compare_as_numbers_and_string_keys_as_text() -> None:
    # 9 < 10 as numbers, though "9" > "10" as text.
    assert chosen("vcpus<10") == ["m7g.large", "10"]
    assert chosen("vcpus=9.0") == ["10"]
    assert chosen("memory_gib=8.00") == ["m7g.large"]
    # `name` is text: "10.0" is not "10".
    assert chosen("name=10") == ["10"]
    assert chosen("name=10.0") == []


def test_comma_separated_selectors_all_must_hold() -> None:
    assert chosen("vcpus>=2,arch=x86_64") == ["p5.48xlarge", "10"]
    assert chosen("gpu in (H100, A100),vcpus>100") == ["p5.48xlarge"]
    assert chosen("arch in (arm64,x86_64), vcpus<100, !gpu") == ["m7g.large", "10"]


def test_repeated_expressions_all_must_hold() -> None:
    assert chosen("vcpus>=2", "arch=arm64") == ["m7g.large"]
    assert chosen("vcpus>=2", "arch=arm64", "gpu") == []


def test_no_selectors_match_everything() -> None:
    assert selectors.parse([]) == []
    assert selectors.parse(["", " , "]) == []
    assert chosen() == ["p5.48xlarge", "m7g.large", "10"]


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("vcpus>=4", Selector(key="vcpus", operator="Gte", values=["4"])),
        ("vcpus>4", Selector(key="vcpus", operator="Gt", values=["4"])),
        ("vcpus<=4", Selector(key="vcpus", operator="Lte", values=["4"])),
        ("vcpus<4", Selector(key="vcpus", operator="Lt", values=["4"])),
        ("gpu==H100", Selector(key="gpu", operator="In", values=["H100"])),
        ("GPU != H100", Selector(key="gpu", operator="NotIn", values=["H100"])),
        ("gpu in ( H100 , A100 )", Selector(key="gpu", operator="In", values=["H100", "A100"])),
        ("gpu notin (T4)", Selector(key="gpu", operator="NotIn", values=["T4"])),
        ("gpu", Selector(key="gpu", operator="Exists")),
        ("!gpu", Selector(key="gpu", operator="DoesNotExist")),
    ],
)
def test_parsed_selector_shape(token: str, expected: Selector) -> None:
    # The upstream Go types.Selector's operators (In, NotIn, Exists, DoesNotExist), and
    # shoal's numeric ones beside them.
    assert selectors.parse([token]) == [expected]


# -- the upstream Go shape as input ----------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "expression"),
    [
        ('[{"key": "gpu", "operator": "In", "values": ["H100"]}]', "gpu=H100"),
        ('[{"key": "gpu", "operator": "NotIn", "values": ["H100", "T4"]}]', "gpu notin (H100,T4)"),
        ('[{"key": "gpu", "operator": "Exists", "values": []}]', "gpu"),
        ('[{"key": "gpu", "operator": "DoesNotExist"}]', "!gpu"),
        ('[{"key": "gpu", "operator": "Exists", "values": null}]', "gpu"),  # Go's nil slice
        ('[{"key": "vcpus", "operator": "Gte", "values": ["9"]}]', "vcpus>=9"),
        ('[{"key": "vcpus", "operator": "lt", "values": [9]}]', "vcpus<9"),  # a number, any case
        (
            '{"resourceSelectors": [{"key": "ARCH", "operator": "in", "values": ["arm64"]}]}',
            "arch=arm64",
        ),
    ],
)
def test_json_selectors_mean_what_the_text_grammar_does(document: str, expression: str) -> None:
    assert selectors.parse([document]) == selectors.parse([expression])
    assert chosen(document) == chosen(expression)


def test_json_and_text_selectors_combine() -> None:
    both = chosen('[{"key":"vcpus","operator":"Gte","values":["2"]}]', "arch=arm64")
    assert both == ["m7g.large"]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ('[{"key": "gpu", "operator": "Equals", "values": ["x"]}]', "--select [0].operator: "),
        ('[{"key": "cores", "operator": "Exists"}]', "--select [0].key: unknown key 'cores'"),
        ('[{"operator": "Exists"}]', "--select [0].key: missing"),
        ('[{"key": "gpu", "operator": "In"}]', "--select [0].values: In needs at least one"),
        ('[{"key": "gpu", "operator": "Exists", "values": ["x"]}]', "[0].values: Exists takes no"),
        ('[{"key": "gpu", "operator": "Gt", "values": ["1"]}]', "[0].operator: Gt needs a numeric"),
        ('[{"key": "vcpus", "operator": "Gt", "values": ["1", "2"]}]', "exactly one number"),
        ('[{"key": "vcpus", "operator": "In", "values": ["x"]}]', "[0].values[0]: 'x' is not a"),
        ('[{"key": "gpu", "operator": "In", "values": [""]}]', "[0].values[0]: empty value"),
        ('[{"key": "gpu", "operator": "In", "values": [true]}]', "[0].values[0]: expected a str"),
        ('[{"key": "gpu", "operatr": "In"}]', "--select [0].operatr: unknown field"),
        ('{"resourceSelectors": [{"key": "gpu", "operator": "X"}]}', "resourceSelectors[0].oper"),
        ('{"selectors": []}', "--select selectors: unknown field"),
        ('{"resourceSelectors": {}}', "--select resourceSelectors: expected a list"),
        ("[1]", "--select [0]: expected an object"),
        ('[{"key": "gpu"', "--select: not valid JSON"),
    ],
)
def test_malformed_json_selector_names_the_field(document: str, fragment: str) -> None:
    assert fragment in _usage_error(document)


def _usage_error(expression: str) -> str:
    with pytest.raises(UsageError) as info:
        selectors.parse([expression])
    return str(info.value)


def test_unknown_key_is_named_and_known_keys_are_listed() -> None:
    message = _usage_error("cores>=4")
    assert "'cores>=4'" in message
    assert "unknown key 'cores'" in message
    for key in ("vcpus", "memory_gib", "gpu", "gpu_count", "arch", "region", "price"):
        assert key in message


def test_unknown_key_inside_a_list_names_its_own_token() -> None:
    message = _usage_error("vcpus>=4,colour=red")
    assert "colour=red" in message
    assert "vcpus>=4'" not in message


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("vcpus>=abc", "'abc' is not a number"),
        ("gpu_count in (1,two)", "'two' is not a number"),
        ("gpu>3", "needs a numeric key"),
        ("arch<=x86_64", "needs a numeric key"),
        ("vcpus=>4", "unexpected '>4'"),
        ("gpu=(H100)", "unexpected"),
        ("gpu in (H100,A100", "unbalanced parentheses"),
        ("gpu in H100,A100)", "unbalanced parentheses"),
        ("gpu=", "empty value"),
        ("gpu in ()", "empty value"),
        ("gpu in (H100,,A100)", "empty value"),
        ("=4", "not a selector"),
        ("!vcpus=4", "not a selector"),
        ("vcpus >=", "empty value"),
    ],
)
def test_malformed_selector_names_the_bad_token(expression: str, fragment: str) -> None:
    message = _usage_error(expression)
    assert repr(expression) in message or repr(expression.strip()) in message
    assert fragment in message


def test_help_lists_every_key() -> None:
    for key in selectors.KNOWN_KEYS:
        assert key in selectors.HELP


def test_selector_record_exposes_absent_gpu_as_absent() -> None:
    record: dict[str, Any] = selector_record(InstanceTypeSpec(name="host", vcpus=1))
    assert not selectors.matches(selectors.parse(["gpu"]), record)
    assert not selectors.matches(selectors.parse(["gpu_memory_gib"]), record)
    assert selectors.matches(selectors.parse(["gpu_count=0"]), record)
