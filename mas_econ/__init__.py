"""The command line, the top stage: ``mas-econ`` (and ``python main.py``) in :mod:`mas_econ.cli`.

It stands above the four stages (``descriptor`` < ``benchmark`` < ``mas`` < ``attribution``) and may import every
one of them; none of them imports it. Each stage declares its own commands (``<stage>/commands.py``).
"""

from descriptor.ownership import check_packages

check_packages()  # another distribution's top-level package of the same name: a clear ImportError
