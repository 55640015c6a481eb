"""A synthetic BrowseComp test set, encrypted the upstream way, and a small corpus that answers it.

The files under ``tests/fixtures/browsecomp`` are what :func:`write_fixture` writes (a test checks it);
regenerate them with ``python tests/browsecomp_fixture.py``. Every fact here is invented.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from benchmark.browsecomp.data import encrypt

FIXTURE = Path(__file__).parent / "fixtures" / "browsecomp"

# (topic, problem, answer)
PROBLEMS = [
    ("History", "A lighthouse on an island whose name means 'grey stone' (Gråsten) was first lit in the year a "
                "famous comet returned. Who was its first keeper?", "Maren Solvik"),
    ("Transport", "A river ferry launched by a shipyard that two sisters founded was renamed in 1962 after a "
                  "botanist. What was the ferry's new name?", "Linnea Voss"),
    ("Games", "A composer's diary of 1921 names a chess opening after a bird of prey she watched from her "
              "window. What is the opening called?", "Kestrel Gambit"),
    ("Science", "An observatory was built on top of an old salt warehouse by the harbour of Ardmoor. In what "
                "year did it open to the public?", "1908"),
    ("Geography", "On which street of Ardmoor did the town's first tram depot stand?", "Tanner's Row"),
]
CANARY = "SYNTHETIC FIXTURE, NOT BROWSECOMP DATA. canary mas-econ-browsecomp-{i}"

TEXT_DOCS = {
    "lighthouses/grasten.txt": "Gråsten Light\nThe lighthouse on Gråsten ('grey stone') island was first lit in "
                               "1835, the year Halley's comet returned. Its first keeper was Maren Solvik, who "
                               "kept the light for thirty-one years.",
    "lighthouses/north_cape.txt": "North Cape Light\nA grey stone tower first lit in 1859. Its keepers came from "
                                  "the mainland and changed every winter.",
    "ferries/voss.md": "# Sisters' Yard ferries\nThe shipyard founded by the sisters Ada and Hild Brenna launched the "
                       "river ferry Morning Star in 1931. In 1962 the ferry was renamed Linnea Voss after the "
                       "botanist who catalogued the river's mosses.",
    "ferries/harbour_line.md": "# Harbour line\nThe harbour ferry was renamed twice, in 1950 and 1974, after "
                               "harbour masters.",
    "ardmoor/observatory.txt": "Ardmoor Observatory\nBuilt on top of the old salt warehouse by the harbour, the "
                               "observatory opened to the public in 1908 with a refractor from Hamburg.",
    "ardmoor/trams.txt": "Trams of Ardmoor\nThe town's first tram depot stood on Tanner's Row; the second, opened "
                         "in 1911, on Quay Street.",
}
JSONL_DOCS = [
    {"docid": "diaries-1921-ortmann", "title": "The diaries of Clara Ortmann, 1921",
     "text": "March. From my window I watched a kestrel hunt all morning, and tonight I named my new opening "
             "after it: the Kestrel Gambit. The bird of prey is patient; so must the gambit be.",
     "url": "https://example.org/ortmann-1921"},
    {"docid": "chess-openings-guide", "title": "A guide to chess openings",
     "text": "Openings named after birds are rare. Most openings carry the name of a player or a city."},
]


def csv_text() -> str:
    """The encrypted test set, as upstream's columns (problem, answer, problem_topic, canary)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["problem", "answer", "problem_topic", "canary"])
    for i, (topic, problem, answer) in enumerate(PROBLEMS):
        canary = CANARY.format(i=i)
        writer.writerow([encrypt(problem, canary), encrypt(answer, canary), topic, canary])
    return out.getvalue()


def write_fixture(root: Path) -> tuple[Path, Path]:
    """Write ``test_set.csv`` and ``corpus/`` under ``root``; (csv path, corpus directory)."""
    corpus = root / "corpus"
    for rel, text in TEXT_DOCS.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text + "\n", encoding="utf-8")
    (corpus / "collection.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in JSONL_DOCS),
                                             encoding="utf-8")
    (root / "test_set.csv").write_text(csv_text(), encoding="utf-8")
    return root / "test_set.csv", corpus


if __name__ == "__main__":
    print(write_fixture(FIXTURE)[0])
