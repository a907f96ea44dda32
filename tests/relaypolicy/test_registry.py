"""The in-memory registry (the daemon's embedded relay uses it)."""

from __future__ import annotations

import pytest

from relaypolicy.registry import MemoryRegistry, NotRegisteredError, PubkeyRegistry
from tests.relaypolicy.builders import BRIDGE, PHONE, STRANGER


def test_register_unregister() -> None:
    registry = MemoryRegistry([BRIDGE])
    assert isinstance(registry, PubkeyRegistry)
    assert registry.is_registered(BRIDGE) and BRIDGE in registry
    assert not registry.is_registered(PHONE)
    assert registry.register(PHONE) is True
    assert registry.register(PHONE) is False
    assert len(registry) == 2
    assert registry.unregister(PHONE) is True
    assert registry.unregister(PHONE) is False
    assert not registry.is_registered(PHONE)
    assert repr(registry) == "MemoryRegistry(1 pubkeys, 0 windows)"


def test_pairing_windows_need_registration() -> None:
    registry = MemoryRegistry([BRIDGE], {BRIDGE: 100})
    assert registry.pairing_window_until(BRIDGE) == 100
    registry.open_pairing_window(BRIDGE, 200)
    assert registry.pairing_window_until(BRIDGE) == 200
    with pytest.raises(NotRegisteredError) as caught:
        registry.open_pairing_window(STRANGER, 100)
    assert str(caught.value) == "pubkey is not registered"
    with pytest.raises(NotRegisteredError):
        MemoryRegistry([], {STRANGER: 1})
    assert registry.close_pairing_window(BRIDGE) is True
    assert registry.close_pairing_window(BRIDGE) is False
    assert registry.pairing_window_until(BRIDGE) is None


def test_unregister_drops_the_window() -> None:
    registry = MemoryRegistry([BRIDGE], {BRIDGE: 100})
    registry.unregister(BRIDGE)
    registry.register(BRIDGE)
    assert registry.pairing_window_until(BRIDGE) is None


def test_replace_keeps_only_windows_of_registered_keys() -> None:
    registry = MemoryRegistry([STRANGER])
    registry.replace([BRIDGE, PHONE], {BRIDGE: 5, STRANGER: 9})
    assert not registry.is_registered(STRANGER)
    assert registry.pairing_window_until(BRIDGE) == 5
    assert registry.pairing_window_until(STRANGER) is None
