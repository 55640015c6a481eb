"""``python main.py COMMAND --help``: the same commands as the installed ``mas-econ`` (mas_econ/cli.py)."""

from mas_econ.cli import console, main  # noqa: F401  (main: what tests and scripts call in-process)

if __name__ == "__main__":
    console(prog="main.py")
