from fractions import Fraction

import pytest

from fleet.core.errors import FieldError
from fleet.core.quantity import canonical_amount, parse_quantity


@pytest.mark.parametrize(
    ("resource", "raw", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1", 1000),
        ("cpu", 2, 2000),
        ("cpu", "0.5", 500),
        ("cpu", 0.1, 100),
        ("cpu", "1u", 1),  # MilliValue rounds up
        ("cpu", "1.0001", 1001),
        ("cpu", "1e3", 1_000_000),
        ("cpu", "+2", 2000),
        ("cpu", ".5", 500),
        ("cpu", "1.", 1000),
        ("memory", "2Gi", 2 * 2**30),
        ("memory", "1.5Ki", 1536),
        ("memory", "1e3", 1000),
        ("memory", "1E3", 1000),
        ("memory", "1E", 10**18),  # a bare E is exa, not an exponent
        ("memory", "1e-3", 1),  # Value rounds up
        ("memory", "1m", 1),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129_000_000),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "1k", 1000),
        ("memory", "8Ei", 2**63 - 1),  # binary SI is capped like apimachinery does
        ("nvidia.com/gpu", 2, 2),
        ("nvidia.com/gpu", "0.5", 1),
        ("ephemeral-storage", " 10Gi ", 10 * 2**30),  # JSON unmarshalling trims spaces
        ("cpu", "0", 0),
        ("cpu", "0.9n", 1),  # finer than nano rounds away from zero to 1n, then up to 1m
    ],
)
def test_canonical_amounts_match_kube_scheduler(resource: str, raw: object, expected: int) -> None:
    assert canonical_amount(resource, raw) == expected


def test_parse_keeps_exact_value_rounded_to_nano() -> None:
    assert parse_quantity("1.5") == Fraction(3, 2)
    assert parse_quantity("1.0000000001") == Fraction(1_000_000_001, 10**9)
    assert parse_quantity("-1") == -1


@pytest.mark.parametrize(
    "raw",
    [
        "abc",
        "",
        "1K",
        "1 Gi",
        "1Gi5",
        "1e",
        "e3",
        "1.2.3",
        "--1",
        "1ee3",
        True,
        None,
        [1],
        "1e2147483648",
    ],
)
def test_unparsable_quantities_name_the_field(raw: object) -> None:
    field = "spec.containers[0].resources.limits.nvidia.com/gpu"
    with pytest.raises(FieldError) as err:
        canonical_amount("nvidia.com/gpu", raw, field=field)
    assert str(err.value).startswith(f"{field}: unparsable quantity")


def test_huge_exponents_parse_as_apimachinery_reads_them_and_saturate() -> None:
    # apimachinery takes any int32 exponent; int64 is the most kube-scheduler compares.
    assert parse_quantity("1e400") == 2**63 - 1
    assert parse_quantity("-1e2147483647") == -(2**63 - 1)
    assert parse_quantity("0e999") == 0
    assert parse_quantity("1e-400") == Fraction(1, 10**9)  # rounded away from zero to 1n
    assert parse_quantity("100000000000000000000") == 2**63 - 1


def test_error_message_quotes_the_value() -> None:
    with pytest.raises(FieldError, match=r"x\.y: unparsable quantity 'abc'"):
        parse_quantity("abc", field="x.y")


def test_non_finite_floats_are_rejected() -> None:
    with pytest.raises(FieldError):
        parse_quantity(float("inf"))
