"""MkDocs hooks: the reference pages that are made from the code, so they cannot drift from it.

A page holding ``<!-- cli-reference -->`` gets every command's ``--help`` (from the parser the command line
builds), and one holding ``<!-- config-reference -->`` gets every config key with its type, default and the
docstring written under its field (the same text the TOML errors and the example config use).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (ROOT, HERE):  # the checkout's code (also outside an editable install), and griffe_docstrings beside us
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from griffe_docstrings import ROLE  # noqa: E402

HELP_WIDTH = "100"
"""Columns argparse wraps the help at (it reads ``COLUMNS``), so the page does not depend on the terminal."""


def cli_reference() -> str:
    """``## mas-econ COMMAND`` and its ``--help`` text, for every command, in the parser's order."""
    from mas_econ.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        parser = build_parser(prog="mas-econ")
        parts = ["```text", parser.format_help().rstrip(), "```"]
        for name, command in _commands(parser):
            level = "#" * (name.count(" ") + 1)
            parts += ["", f"{level} `{name}`", "", "```text", command.format_help().rstrip(), "```"]
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts)


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and sub-command under ``parser`` (``mas-econ model serve`` too), in the parser's order."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                out += [(command.prog, command), *_commands(command)]
    return out


def _markdown(text: str) -> str:
    """A docstring's text for a Markdown table cell: one line, reST roles and double backticks as code."""
    text = ROLE.sub(lambda m: f"`{m[1]}`", " ".join(text.split()))
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|")


def _field_docstrings(cls: type) -> dict[str, str]:
    """Field -> the docstring written under it, for ``cls`` and its bases."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            node = ast.parse(inspect.cleandoc("\n" + inspect.getsource(klass))).body[0]
        except (OSError, TypeError):
            continue
        for a, b in zip(node.body, node.body[1:]):
            if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                out[a.target.id] = _markdown(inspect.cleandoc(b.value.value))
    return out


def _model_in(annotation: object) -> tuple[type[BaseModel] | None, str]:
    """The settings model an annotation holds (itself, or a dict's values) and how its keys are written."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    if typing.get_origin(annotation) is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value, ".NAME"
    return None, ""


def _type_name(annotation: object) -> str:
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    return str(annotation).replace("typing.", "")


def _heading(model: type[BaseModel]) -> str:
    """The first paragraph of a settings model's docstring, as Markdown."""
    return _markdown(inspect.cleandoc(model.__doc__ or "").split("\n\n")[0])


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    docs = _field_docstrings(model)
    rows: list[str] = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        if info.exclude and name != "api_key":
            continue
        key = f"{prefix}{info.alias or name}"
        sub, suffix = _model_in(info.annotation)
        if sub is not None:
            nested.append((key + suffix, sub))
            continue
        default = "" if info.is_required() else repr(info.get_default(call_default_factory=True))
        # a pipe ends a table cell, even inside code: each member of a union is code of its own
        kind = " \\| ".join(f"`{part}`" for part in _type_name(info.annotation).split(" | "))
        rows.append(f"| `{key}` | {kind} | `{default}` | {docs.get(name, '')} |"
                    .replace("``", ""))
    extra = model.__annotations__.get("__pydantic_extra__") if model.model_config.get("extra") == "allow" else None
    if isinstance(extra, str):  # postponed annotations: the keys a table allows beyond its fields
        extra = typing.get_type_hints(model).get("__pydantic_extra__")
    sub, _ = _model_in(extra)
    if sub is not None:
        nested.append((f"{prefix}NAME", sub))
    out = [TABLE_HEAD, *rows] if rows else []
    for key, sub in nested:
        out += ["", f"### `[{key}]`", "", _heading(sub), "", *_rows(sub, f"{key}.")]
    return out


TABLE_HEAD = "| key | type | default | what it is |\n|---|---|---|---|"


def config_reference() -> str:
    """Every key of the experiment config, table by table (``[mas]``, ``[models.NAME]``, ...)."""
    from mas.config import ExperimentConfig

    return "\n".join(_rows(ExperimentConfig, ""))


MARKERS = {"<!-- cli-reference -->": cli_reference, "<!-- config-reference -->": config_reference}


def on_page_markdown(markdown: str, **_: object) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
