"""merge_patch: the RFC 7386 patch that turns one object into another."""

from __future__ import annotations

from fleet.kube import merge_patch


def test_equal_objects_need_no_patch() -> None:
    obj = {"a": 1, "b": {"c": [1, 2]}}
    assert merge_patch(obj, obj) == {}


def test_a_key_gone_is_nulled_at_its_depth_and_lists_are_replaced_whole() -> None:
    current = {"placement": {"affinity": {"names": ["m1"]}, "tolerations": [1]}, "keep": 1}
    desired = {"placement": {"tolerations": [1, 2]}, "keep": 1}
    assert merge_patch(current, desired) == {"placement": {"affinity": None, "tolerations": [1, 2]}}


def test_an_object_replaced_by_a_scalar_or_none_is_set_whole() -> None:
    assert merge_patch({"a": {"b": 1}}, {"a": None}) == {"a": None}
    assert merge_patch({"a": 1}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert merge_patch({}, {"a": {"b": 1}}) == {"a": {"b": 1}}
