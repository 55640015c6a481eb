"""SciCode's multi-step prompts, built as upstream's ``eval/scripts/gencode.py`` builds them.

A sub-step's prompt shows the previous sub-steps (their descriptions, with background when asked, each followed
by its code), then the next step's description and function header with its return line, then the problem's
dependencies, in one of upstream's two templates: ``background_comment_template.txt`` without background (the
model is asked to write the background itself, as a comment) and ``multistep_template.txt`` with it.

Where upstream shows the model's own code for the previous sub-steps (it generates them in order), this adapter
shows their ground truth (every sub-step is a task of its own, so a run never sees another run's code); on test
problems, which have no ground truth, it shows the hand-written code of the three sub-steps upstream gives as
context and otherwise the previous step's header and return line (see the adapter's docstring).
"""

from __future__ import annotations

import re
from functools import lru_cache

from benchmark.humaneval import extract_code
from benchmark.scicode.data import Problem, Step, data_text

_IMPORT_RE = re.compile(r"^(?:import\s+\S.*|from\s+\S+\s+import\s+.*)$", re.MULTILINE)


@lru_cache(maxsize=2)
def template(with_background: bool) -> str:
    return data_text("multistep_template.txt" if with_background else "background_comment_template.txt")


def _described(step: Step, with_background: bool) -> str:
    return f"{step.description}\n{step.background}" if with_background else step.description


def previous_code(step: Step) -> str:
    """The code a later sub-step's prompt (and program) carries for ``step``."""
    return step.ground_truth if step.ground_truth is not None else f"{step.header}\n\n{step.return_line}"


def step_prompt(problem: Problem, step: Step, with_background: bool) -> str:
    """The prompt for ``step``: upstream's template filled as upstream fills it."""
    lines: list[str] = []
    for prev in problem.steps[:step.index - 1]:
        lines += [_described(prev, with_background), previous_code(prev), "------"]
    next_step = "\n\n".join([_described(step, with_background), f"{step.header}\n\n{step.return_line}"])
    return template(with_background).format(problem_steps_str="\n\n".join(lines[:-1]), next_step_str=next_step,
                                            dependencies=problem.dependencies)


def answer_code(answer: str, function_name: str) -> str:
    """The code of a model's answer, as upstream's ``extract_python_script`` takes it: the fenced block (here the
    one defining ``function_name`` when there are several) without its top-level import lines (the program
    starts with the problem's dependencies).

    >>> answer_code("```python\\nimport numpy as np\\ndef f(x):\\n    return x\\n```", "f")
    'def f(x):\\n    return x\\n'
    """
    return _IMPORT_RE.sub("", extract_code(answer, function_name)).lstrip("\n")


NEXT_STEP_MARKER = "\nNEXT STEP - PROBLEM "
"""Where both templates start the step to solve (then ``STEP AND ...`` or ``DESCRIPTION AND FUNCTION HEADER:``)."""
DEPENDENCIES_MARKER = "\nDEPENDENCIES:\n"


def next_step_header(prompt: str) -> str | None:
    """The function header (``def`` line and docstring) of the step a SciCode prompt asks for, or None.

    >>> next_step_header("x\\nNEXT STEP - PROBLEM STEP AND FUNCTION HEADER:\\nDo.\\n\\ndef f(a):\\n    '''Doc.'''\\n\\n"
    ...                  "    return a\\n\\nDEPENDENCIES:\\nimport numpy as np")
    "def f(a):\\n    '''Doc.'''"
    """
    start = prompt.rfind(NEXT_STEP_MARKER)
    end = prompt.find(DEPENDENCIES_MARKER, start)
    if start < 0 or end < 0:
        return None
    section = prompt[start:end]
    at = re.search(r"^(?:def|class)\s", section, re.MULTILINE)
    if at is None:
        return None
    lines = section[at.start():].rstrip().splitlines()
    if len(lines) > 1 and lines[-1].lstrip().startswith("return"):
        lines = lines[:-1]
    return "\n".join(lines).rstrip()
