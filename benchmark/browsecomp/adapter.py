"""The ``browsecomp`` benchmark adapter: encrypted tasks, browsing tools, upstream's grading."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.browsecomp.data import Row, decrypt, read_rows
from benchmark.browsecomp.environment import TOOL_ARGS, BrowseCompEnvironment
from benchmark.browsecomp.grading import (
    QUERY_TEMPLATE,
    exact_match,
    grader_prompt,
    judge_verdict,
    parse_response,
)
from benchmark.browsecomp.search import SearchBackend
from benchmark.environment import Action, Environment
from descriptor.errors import UserError

BACKENDS = ("local", "hosted", "none")
SEALED_QUESTION = "(a BrowseComp problem: encrypted in this task's reference, decrypted in memory only)"
"""The question run files record instead of the problem (:meth:`BrowseCompBenchmark.recorded_task`)."""
DEFAULTS: dict[str, Any] = {"backend": "local", "hosted_tool": "tavily", "index_cache": None, "top_k": 5,
                            "page_chars": 6000}


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"benchmarks.browsecomp.{name}: expected a positive integer, got {value!r}")
    return value


@BENCHMARKS.register("browsecomp")
class BrowseCompBenchmark(Benchmark):
    """BrowseComp (Wei et al. 2025): 1,266 hard-to-find, easy-to-check questions for browsing agents.

    Tasks come from the official encrypted CSV at option ``data_path`` (never vendored; decrypted in
    memory with each row's canary, never to disk: a task's reference keeps the row's ciphertext, and run
    files record :data:`SEALED_QUESTION` for its question). The question is upstream's query template
    (Explanation / Exact Answer / Confidence).
    Tools (option ``backend``): ``local`` (default) gives the agents ``search`` and ``open_page`` over the
    document directory at ``corpus_path`` (BrowseComp-Plus style, SQLite FTS5 + BM25); ``hosted`` a
    LangChain web-search tool (``hosted_tool``, key from the environment; untested here); ``none`` no
    tools (closed book). Options ``top_k`` (results per search, 5), ``page_chars`` (characters of an
    opened page, 6000), ``index_cache`` (directory keeping the index between processes).
    Success: with a ``judge`` route configured, the judge answers ``correct: yes`` to upstream's grading
    template; otherwise the ``Exact Answer:`` equals the gold answer after normalisation (case, accents,
    punctuation, articles). ``details`` record the grader used and the response's confidence, from which
    the summaries compute calibration error (``calibration_error``).
    Data licence: MIT (openai/simple-evals); the test set is downloaded by the user.
    """

    name: ClassVar[str] = "browsecomp"
    answer_kind: ClassVar[Literal["text"]] = "text"
    license: ClassVar[str] = "MIT (BrowseComp, OpenAI, openai/simple-evals); data supplied by the user"
    success_definition: ClassVar[str] = ("judge says 'correct: yes' (upstream's template) when a judge route is "
                                         "configured, else normalised exact match of the Exact Answer")
    option_names: ClassVar[tuple[str, ...]] = ("data_path", "corpus_path", *DEFAULTS)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.settings = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
        if self.settings["backend"] not in BACKENDS:
            raise UserError(f"benchmarks.browsecomp.backend: expected one of {', '.join(BACKENDS)}, "
                            f"got {self.settings['backend']!r}")
        self.top_k = _positive_int("top_k", self.settings["top_k"])
        self.page_chars = _positive_int("page_chars", self.settings["page_chars"])
        self._backend: SearchBackend | None = None

    def _rows(self) -> tuple[Row, ...]:
        path = self.settings.get("data_path")
        if not path:
            raise UserError("benchmarks.browsecomp.data_path is not set: point it at the encrypted "
                            "browse_comp_test_set.csv from openai/simple-evals")
        return read_rows(str(path))

    def backend(self) -> SearchBackend | None:
        """The search backend (built once; the local index once per process and corpus), None for ``none``."""
        if self._backend is None and self.settings["backend"] == "local":
            from benchmark.browsecomp.local import local_index

            if not self.settings.get("corpus_path"):
                raise UserError("benchmarks.browsecomp.corpus_path is not set: the local backend searches a "
                                "directory of documents (or set benchmarks.browsecomp.backend = \"hosted\" or \"none\")")
            cache = self.settings["index_cache"]
            self._backend = local_index(str(self.settings["corpus_path"]), str(cache) if cache else None)
        elif self._backend is None and self.settings["backend"] == "hosted":
            from benchmark.browsecomp.hosted import HostedSearch, make_tool

            self._backend = HostedSearch(make_tool(str(self.settings["hosted_tool"])))
        return self._backend

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` rows in file order (``seed`` is unused: the set is fixed)."""
        rows = self._rows()
        if self.settings["backend"] == "local":
            self.backend()  # a missing or empty corpus fails here, before any run
        return [Task(task_id=f"browsecomp_{r.index:04d}",
                     question=QUERY_TEMPLATE.format(question=r.decrypted_problem()),
                     reference={"problem": r.problem, "answer": r.answer, "canary": r.canary},
                     metadata={"topic": r.topic, "row": r.index})
                for r in (rows if limit is None else rows[:limit])]

    def recorded_task(self, task: Task) -> Task:
        """The task with :data:`SEALED_QUESTION` for its question: run files never hold the problem in clear."""
        return Task(task_id=task.task_id, question=SEALED_QUESTION, reference=task.reference, metadata=task.metadata)

    def restored_task(self, recorded: Task) -> Task:
        if recorded.question != SEALED_QUESTION:
            return recorded
        return Task(task_id=recorded.task_id, question=QUERY_TEMPLATE.format(question=self._clear(recorded, "problem")),
                    reference=recorded.reference, metadata=recorded.metadata)

    @staticmethod
    def _clear(task: Task, column: str) -> str:
        return decrypt(task.reference[column], task.reference["canary"])

    def make_environment(self, task: Task) -> BrowseCompEnvironment | None:
        backend = self.backend()
        return None if backend is None else BrowseCompEnvironment(backend, top_k=self.top_k,
                                                                   page_chars=self.page_chars)

    def _evidence(self, task: Task) -> tuple[str, str] | None:
        """(docid, the answer as the corpus writes it) of the best page stating the answer; local backend only."""
        backend = self.backend()
        find = getattr(backend, "find_phrase", None)
        return None if find is None else find(self._clear(task, "answer"))

    def reference_actions(self, task: Task) -> list[Action]:
        """On the local backend: search the corpus for the answer, open the best page that states it."""
        found = self._evidence(task)
        if found is None:
            return []
        docid, phrase = found
        return [Action(name="search", args={"query": phrase}), Action(name="open_page", args={"docid": docid})]

    def reference_answer(self, task: Task) -> str:
        """The answer as the corpus states it (local backend; "not found" when no page does), else the gold one."""
        if self.settings["backend"] != "local":
            return f"Explanation: the reference answer.\nExact Answer: {self._clear(task, 'answer')}\nConfidence: 100%"
        found = self._evidence(task)
        if found is None:
            return "Explanation: no document in the corpus states the answer.\nExact Answer: not found\nConfidence: 0%"
        return f"Explanation: document {found[0]} states it.\nExact Answer: {found[1]}\nConfidence: 100%"

    def judge_fields(self, task: Task, answer: str) -> dict[str, str]:
        """The grader's ``response`` and ``correct_answer``, as :meth:`judge_prompt` fills them in."""
        return {"response": answer, "correct_answer": self._clear(task, "answer")}

    def judge_prompt(self, task: Task, answer: str) -> str | None:
        """Upstream's grading prompt for ``answer`` (the runtime sends it to the ``judge`` route when one is set)."""
        return grader_prompt(self._clear(task, "problem"), answer, self._clear(task, "answer"))

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None, *,
                 judge_reply: str | None = None) -> Evaluation:
        """Graded by the judge's reply when there is one, else by exact match; the gold answer is not recorded."""
        response = parse_response(answer)
        details: dict[str, Any] = {"exact_answer": response.exact_answer[:500],
                                   "stated_confidence": response.stated_confidence}
        if judge_reply is None:
            ok = exact_match(response.exact_answer, self._clear(task, "answer"))
            confidence = response.confidence
            details["grader"] = "exact_match"
        else:
            verdict = judge_verdict(judge_reply, answer)  # what the answer wrote cannot be the judge's verdict
            ok = verdict.correct is True  # no verdict counts as wrong, as upstream's default "no"
            confidence = response.confidence if verdict.confidence is None else verdict.confidence
            details.update(grader="llm_judge", judge_correct=verdict.correct,
                           judge_extracted_answer=(verdict.extracted_answer or "")[:500])
        details["confidence"] = confidence
        return Evaluation(success=ok, score=float(ok), details=details)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "options": {k: v for k, v in self.settings.items() if k != "data_path"},
                "tools": list(TOOL_ARGS) if self.settings["backend"] != "none" else [],
                "grading": "llm_judge with a [models.judge] route or roles.judge, else exact_match",
                "calibration": "calibration_error in the summaries: RMS over bins of 100 runs sorted by confidence"}
