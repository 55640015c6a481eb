"""WorkBench (Styles et al. 2024): workplace tasks acted out with tools on sandbox databases, offline."""

from benchmark.workbench.adapter import WorkbenchBenchmark
from benchmark.workbench.environment import WorkbenchEnvironment
from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolkit import TOOLS, resolve, select_tools

__all__ = ["TOOLS", "WorkbenchBenchmark", "WorkbenchEnvironment", "WorkbenchState", "resolve", "select_tools"]
