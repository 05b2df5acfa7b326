import pytest

from fleet.core.errors import FieldError
from fleet.core.resources import EMPTY, Resources, format_amount


def test_zero_entries_are_dropped_so_equal_vectors_hash_equal() -> None:
    a = Resources({"cpu": 1000, "nvidia.com/gpu": 0})
    b = Resources(cpu=1000)
    assert a == b and hash(a) == hash(b)
    assert "nvidia.com/gpu" not in a
    assert a == {"cpu": 1000, "memory": 0}


def test_arithmetic() -> None:
    a = Resources(cpu=1000, memory=10)
    b = Resources(cpu=400)
    assert a + b == Resources(cpu=1400, memory=10)
    assert a - b == Resources(cpu=600, memory=10)
    assert b * 3 == Resources(cpu=1200)
    assert (a - a) == EMPTY
    assert a.max(Resources(cpu=200, memory=50)) == Resources(cpu=1000, memory=50)
    assert Resources(cpu=-5, memory=3).clamped() == Resources(memory=3)


def test_fits_and_copies() -> None:
    free = Resources({"cpu": 4000, "nvidia.com/gpu": 8})
    worker = Resources({"cpu": 1000, "nvidia.com/gpu": 2})
    assert worker.fits_in(free)
    assert worker.copies_in(free) == 4
    assert Resources(memory=1).copies_in(free) == 0
    assert not Resources(memory=1).fits_in(free)


def test_types_are_checked() -> None:
    with pytest.raises(TypeError):
        Resources(cpu=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Resources(cpu=True)


def test_parse_resource_list_and_reject_negative() -> None:
    assert Resources.parse({"cpu": "1500m", "memory": "4Gi"}) == Resources(
        cpu=1500, memory=4 * 2**30
    )
    with pytest.raises(FieldError, match=r"limits\.cpu: negative quantity"):
        Resources.parse({"cpu": "-1"}, field="limits")
    with pytest.raises(FieldError, match="limits: expected a map"):
        Resources.parse(["cpu"], field="limits")


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("nvidia.com/gpu", 2, "2 GPUs"),
        ("nvidia.com/gpu", 1, "1 GPU"),
        ("cpu", 1500, "1500m CPU"),
        ("cpu", 2000, "2 CPU"),
        ("memory", 4 * 2**30, "4Gi memory"),
        ("memory", 1536 * 2**20, "1.5Gi memory"),
        ("memory", 1000, "1000 memory"),
        ("pods", 3, "3 pod slots"),
        ("example.com/fpga", 2, "2 example.com/fpga"),
    ],
)
def test_human_formatting(name: str, amount: int, text: str) -> None:
    assert format_amount(name, amount) == text


def test_describe_orders_accelerators_first_and_skips_pod_slots() -> None:
    r = Resources({"memory": 4 * 2**30, "cpu": 1500, "nvidia.com/gpu": 2, "pods": 1})
    assert r.describe() == "2 GPUs, 1500m CPU, 4Gi memory"
    assert EMPTY.describe() == "nothing"
