"""``python main.py COMMAND --help``: the same commands as the installed ``mas-econ`` (attribution/cli/main.py)."""

import sys

from attribution.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
