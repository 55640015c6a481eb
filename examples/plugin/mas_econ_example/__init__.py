"""An example package extending mas-econ from outside: a benchmark and a topology, registered by entry points.

Nothing here is imported by the project; the registries import these modules (see ``pyproject.toml``).
"""
