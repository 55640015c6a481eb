"""``python main.py COMMAND --help``: the same commands as the installed ``mas-econ`` (attribution/cli/main.py)."""

from attribution.cli.main import console, main  # noqa: F401  (main: what tests and scripts call in-process)

if __name__ == "__main__":
    console(prog="main.py")
