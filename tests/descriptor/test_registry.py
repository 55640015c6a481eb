"""The one registry type: decorator, duplicate names, entry points of installed packages, plugin modules."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from descriptor.errors import UserError
from descriptor.registry import Registry, RegistryError, load_plugins, loaded_plugins


def test_a_decorated_entry_is_found_by_name_and_an_unknown_name_lists_the_known_ones():
    reg: Registry[object] = Registry("widget", "mas_econ.test_widgets")

    @reg.register("a")
    def a() -> int:
        return 1

    assert reg.get("a") is a and reg["a"] is a and "a" in reg and list(reg) == ["a"]
    with pytest.raises(UserError, match=r"unknown widget 'b'; known: a"):
        reg.get("b")


def test_registering_a_different_entry_under_a_taken_name_names_both_origins():
    reg: Registry[object] = Registry("widget", "mas_econ.test_widgets")

    def first() -> None: ...

    def second() -> None: ...

    reg.register("x", first)
    reg.register("x", first)  # the same entry again (a re-import) is harmless
    with pytest.raises(RegistryError, match=r"widget 'x' is registered twice: by .*first and by .*second"):
        reg.register("x", second)


def test_names_are_sorted_or_in_the_order_registered():
    reg: Registry[int] = Registry("widget", "mas_econ.test_widgets")
    reg.register("b", 1)
    reg.register("a", 2)
    assert reg.names() == ["a", "b"] and reg.names(in_order=True) == ["b", "a"]


def _install_fake_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str, value: str) -> None:
    """A distribution on sys.path with one entry point, found by importlib.metadata like an installed one."""
    pkg = tmp_path / "widgetplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("BLUE = '#00f'\n")
    info = tmp_path / "widgetplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: widgetplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nblue = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_installed_packages_entry_point_is_registered_under_its_name_with_the_distribution_as_origin(
        tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, monkeypatch, "mas_econ.test_colours", "widgetplug:BLUE")
    reg: Registry[str] = Registry("colour", "mas_econ.test_colours")
    assert reg.get("blue") == "#00f"
    assert reg.origin("blue").startswith("widgetplug:widgetplug:BLUE")


def test_an_entry_point_that_fails_to_load_names_the_plugin(tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, monkeypatch, "mas_econ.test_broken", "widgetplug:MISSING")
    reg: Registry[str] = Registry("colour", "mas_econ.test_broken")
    with pytest.raises(RegistryError, match=r"colour plugin widgetplug:widgetplug:MISSING .* did not load"):
        reg.names()


def test_a_plugin_module_registers_on_import_and_is_remembered_for_worker_processes(tmp_path, monkeypatch):
    reg: Registry[str] = Registry("colour", "mas_econ.test_plugin_colours")
    monkeypatch.setitem(sys.modules, "test_registry_target", type(sys)("test_registry_target"))
    sys.modules["test_registry_target"].REG = reg  # type: ignore[attr-defined]
    (tmp_path / "greenplug.py").write_text(textwrap.dedent("""
        from test_registry_target import REG
        REG.register("green", "#0f0")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "greenplug", raising=False)
    # this process's plugin list goes to every later sweep's workers: keep the test's module out of it
    monkeypatch.setattr("descriptor.registry._PLUGINS", [])
    assert "greenplug" in load_plugins(["greenplug"])
    assert reg.get("green") == "#0f0" and "greenplug" in loaded_plugins()
    with pytest.raises(RegistryError, match=r"plugin 'no_such_plugin_module' could not be imported"):
        load_plugins(["no_such_plugin_module"])


def test_an_entry_point_naming_an_object_its_module_also_registers_with_the_decorator_is_no_duplicate(
        tmp_path, monkeypatch):
    """The registry's docs let an entry point name an object; that object decorated in its module as well was
    reported as registered twice, both origins naming the same class."""
    reg: Registry[type] = Registry("colour", "mas_econ.test_same_object")
    monkeypatch.setitem(sys.modules, "test_registry_same", type(sys)("test_registry_same"))
    sys.modules["test_registry_same"].REG = reg  # type: ignore[attr-defined]
    pkg = tmp_path / "samepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from test_registry_same import REG

        @REG.register("toy")
        class Toy:
            pass
    """))
    info = tmp_path / "samepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: samepkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mas_econ.test_same_object]\ntoy = samepkg:Toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "samepkg", raising=False)
    assert reg.names() == ["toy"] and reg.get("toy").__name__ == "Toy"
    with pytest.raises(RegistryError, match="registered twice"):  # a different object under the name still is
        reg.register("toy", type("Toy", (), {}))
