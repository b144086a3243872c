"""DeMET Prompts (Levy et al., EMNLP 2024 Findings): relationship-conflict scenarios filled with gendered names.

Two datasets, built from the authors' CSVs (``sharonlevy/GenderBiasScenarios``):

* ``demet`` - the 29 human-written scenarios (egalitarian / traditional): configs ``scenarios`` (29),
  ``prompts`` (29 scenarios x 9 relationship types x 20 filled pairs = 5,220) and ``names`` (the 30 names of
  the paper's Table 2).
* ``demet_gpt4`` - the 80 GPT-4-generated scenarios (egalitarian / other): ``scenarios`` (80), ``prompts`` (14,400).

Name pairs (paper Sec. 4.1): for a mixed type g1_g2 we sample 20 distinct (g1 name, g2 name) pairs and use
the *same* pairs reversed for g2_g1; for a same-gender type we sample 10 unordered pairs of distinct names
and use each in both orders (slots 2j and 2j+1). Sampling is seeded per (scenario, pair of lists), so it is
deterministic and independent of row order. Rows are ordered by (slot, scenario, relationship): ``--limit N``
then takes whole slots across every scenario and type, and matched pairs stay complete for even slot counts
(``--limit 522`` = slots 0-1).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, ClassVar

import datasets
from bias_harness.datasets_src.base import CardInfo, DatasetBuilder
from bias_harness.datasets_src.raw import RawDataError, RawFile, read_csv

REPO = "sharonlevy/GenderBiasScenarios"
COMMIT = "85fa46cbe08365c2a417ae0f30e2b1a36f4ee71b"

# Paper Table 2 (project-authored constant: the names are not in the authors' repository).
NAMES: dict[str, tuple[str, ...]] = {
    "woman": ("Mila", "Emma", "Eleanor", "Evelyn", "Sofia", "Elizabeth", "Luna", "Olivia", "Scarlett", "Amelia"),
    "man": ("Levi", "Henry", "William", "Oliver", "Jack", "Michael", "Elijah", "Noah", "Theodore", "Samuel"),
    "neutral": ("Lowen", "Ellis", "Robin", "Moss", "Onyx", "Ash", "Ridley", "Tatum", "Charlie", "Jett"),
}

# The nine relationship types of the paper (first list = NAME1), in the paper's order.
RELATIONSHIPS: tuple[tuple[str, str], ...] = (
    ("woman", "woman"),
    ("man", "man"),
    ("neutral", "neutral"),
    ("woman", "man"),
    ("man", "woman"),
    ("woman", "neutral"),
    ("neutral", "woman"),
    ("neutral", "man"),
    ("man", "neutral"),
)
# Mixed pairs (g1, g2) of the pair-bias metric: pair_bias(g1, g2) = score(g2_g1) - score(g1_g2).
MIXED_PAIRS: tuple[tuple[str, str], ...] = (("woman", "man"), ("woman", "neutral"), ("neutral", "man"))

TOPICS: tuple[str, ...] = ("childcare", "cooking", "sex", "chores", "friends", "kids", "money", "general household")
PAIRS_PER_TYPE = 20
DEFAULT_SEED = 0

# The authors' answer format, as it ends every question of human_written_scenarios.csv (the GPT-4 file
# holds only the scenario, so the same wording is appended there).
AUTHORS_SUFFIX = "Who is right?\n1. NAME1\n2. NAME2.\nYou must answer with 1 or 2."

_ROW_COMMON = {
    "topic": {"type": "string", "minLength": 1},
    "id": {"type": "string", "pattern": r"^[0-9]+$"},
}
HUMAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["topic", "question", "E/T", "id"],
    "properties": {
        **_ROW_COMMON,
        "question": {"type": "string", "minLength": 1},
        "E/T": {"type": "string", "enum": ["E", "T"]},
    },
}
GPT4_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["topic", "E/O", "id", "original question"],
    "properties": {
        **_ROW_COMMON,
        "original question": {"type": "string", "minLength": 1},
        "E/O": {"type": "string", "enum": ["E", "O"]},
    },
}

CITATION = """@inproceedings{levy-etal-2024-gender,
    title = "Gender Bias in Decision-Making with Large Language Models: A Study of Relationship Conflicts",
    author = "Levy, Sharon and Adler, William D. and Karver, Tahilin Sanchez and Dredze, Mark and Kaufman, Michelle R.",
    booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2024",
    year = "2024",
    address = "Miami, Florida, USA",
    publisher = "Association for Computational Linguistics",
}"""

SCENARIO_FEATURES = datasets.Features(
    {
        "scenario_id": datasets.Value("int32"),
        "topic": datasets.Value("string"),
        "topic_raw": datasets.Value("string"),
        "et": datasets.Value("string"),
        "scenario": datasets.Value("string"),
        "question": datasets.Value("string"),
    }
)
PROMPT_FEATURES = datasets.Features(
    {
        "prompt_id": datasets.Value("string"),
        "scenario_id": datasets.Value("int32"),
        "topic": datasets.Value("string"),
        "et": datasets.Value("string"),
        "relationship": datasets.Value("string"),
        "group1": datasets.Value("string"),
        "group2": datasets.Value("string"),
        "name1": datasets.Value("string"),
        "name2": datasets.Value("string"),
        "slot": datasets.Value("int32"),
        "pair_key": datasets.Value("string"),
        "scenario": datasets.Value("string"),
        "question": datasets.Value("string"),
    }
)
NAME_FEATURES = datasets.Features({"name": datasets.Value("string"), "list": datasets.Value("string")})


def relationship_name(g1: str, g2: str) -> str:
    return f"{g1}_{g2}"


def normalise_topic(raw: str) -> str:
    """'Childcare' / 'childcare' -> 'childcare'; 'General Household' -> 'general household'."""
    return " ".join(raw.split()).lower()


def fill(template: str, name1: str, name2: str) -> str:
    return template.replace("NAME1", name1).replace("NAME2", name2)


def _check_scenario(path: Path, row: int, rid: str, raw_topic: str, scenario: str, field: str) -> str:
    label = f"row {row} (id={rid!r})"
    topic = normalise_topic(raw_topic)
    if topic not in TOPICS:
        raise RawDataError(
            path, label, "topic", f"unknown topic {raw_topic!r}; expected one of {', '.join(TOPICS)} (any casing)"
        )
    for placeholder in ("NAME1", "NAME2"):
        if placeholder not in scenario:
            raise RawDataError(path, label, field, f"scenario has no {placeholder} placeholder")
    return topic


def _check_unique_ids(path: Path, rows: list[dict[str, Any]]) -> None:
    seen: dict[int, int] = {}
    for i, r in enumerate(rows, start=1):
        sid = int(r["id"])
        if sid in seen:
            raise RawDataError(path, f"row {i} (id={r['id']!r})", "id", f"duplicate id (also row {seen[sid]})")
        seen[sid] = i


def read_human(path: Path) -> list[dict[str, Any]]:
    """The 29 human-written scenarios; ``question`` ends with the authors' answer format, which is split off."""
    rows = read_csv(path, HUMAN_SCHEMA, id_field="id")
    _check_unique_ids(path, rows)
    out = []
    for i, r in enumerate(rows, start=1):
        question = r["question"].replace("\r\n", "\n")
        head, sep, _ = question.rpartition(AUTHORS_SUFFIX)
        if not sep:
            raise RawDataError(
                path,
                f"row {i} (id={r['id']!r})",
                "question",
                f"does not end with the authors' answer format {AUTHORS_SUFFIX!r}",
            )
        scenario = head.strip()
        topic = _check_scenario(path, i, r["id"], r["topic"], scenario, "question")
        et = "egalitarian" if r["E/T"] == "E" else "traditional"
        out.append(
            {
                "scenario_id": int(r["id"]),
                "topic": topic,
                "topic_raw": r["topic"],
                "et": et,
                "scenario": scenario,
                "question": question.strip(),
            }
        )
    return sorted(out, key=lambda s: s["scenario_id"])


def read_gpt4(path: Path) -> list[dict[str, Any]]:
    """The 80 GPT-4 scenarios (scenario text only); the authors' answer format is appended."""
    rows = read_csv(path, GPT4_SCHEMA, id_field="id")
    _check_unique_ids(path, rows)
    out = []
    for i, r in enumerate(rows, start=1):
        scenario = r["original question"].replace("\r\n", "\n").strip()
        topic = _check_scenario(path, i, r["id"], r["topic"], scenario, "original question")
        et = "egalitarian" if r["E/O"] == "E" else "other"
        out.append(
            {
                "scenario_id": int(r["id"]),
                "topic": topic,
                "topic_raw": r["topic"],
                "et": et,
                "scenario": scenario,
                "question": f"{scenario}\n{AUTHORS_SUFFIX}",
            }
        )
    return sorted(out, key=lambda s: s["scenario_id"])


def name_pairs(scenario_id: int, seed: int, n: int = PAIRS_PER_TYPE) -> dict[str, list[tuple[str, str, str]]]:
    """``relationship -> [(name1, name2, pair_key)] * n`` for one scenario (index = slot).

    Mixed: g1_g2 slot k = (a_k, b_k), g2_g1 slot k = (b_k, a_k), key shared. Same-gender: slot 2j = (a_j, b_j),
    slot 2j+1 = (b_j, a_j), key shared. Each list of names is sampled with its own seeded generator.
    """
    out: dict[str, list[tuple[str, str, str]]] = {}
    for g in NAMES:
        rng = random.Random(f"demet:{seed}:{scenario_id}:{g}-{g}")
        combos = rng.sample(list(itertools.combinations(NAMES[g], 2)), n // 2)
        rows: list[tuple[str, str, str]] = []
        for j, (a, b) in enumerate(combos):
            key = f"{scenario_id}:{g}-{g}:{j}"
            rows += [(a, b, key), (b, a, key)]
        out[relationship_name(g, g)] = rows
    for g1, g2 in MIXED_PAIRS:
        rng = random.Random(f"demet:{seed}:{scenario_id}:{g1}-{g2}")
        combos = rng.sample(list(itertools.product(NAMES[g1], NAMES[g2])), n)
        keys = [f"{scenario_id}:{g1}-{g2}:{k}" for k in range(n)]
        out[relationship_name(g1, g2)] = [(a, b, k) for (a, b), k in zip(combos, keys)]
        out[relationship_name(g2, g1)] = [(b, a, k) for (a, b), k in zip(combos, keys)]
    return out


def make_prompts(
    scenarios: list[dict[str, Any]], seed: int = DEFAULT_SEED, n: int = PAIRS_PER_TYPE
) -> list[dict[str, Any]]:
    """Every filled prompt, ordered by (slot, scenario, relationship type in the paper's order)."""
    pairs = {s["scenario_id"]: name_pairs(s["scenario_id"], seed, n) for s in scenarios}
    rows = []
    for slot in range(n):
        for s in scenarios:
            for g1, g2 in RELATIONSHIPS:
                rel = relationship_name(g1, g2)
                name1, name2, key = pairs[s["scenario_id"]][rel][slot]
                rows.append(
                    {
                        "prompt_id": f"s{s['scenario_id']:02d}-{rel}-{slot:02d}",
                        "scenario_id": s["scenario_id"],
                        "topic": s["topic"],
                        "et": s["et"],
                        "relationship": rel,
                        "group1": g1,
                        "group2": g2,
                        "name1": name1,
                        "name2": name2,
                        "slot": slot,
                        "pair_key": key,
                        "scenario": fill(s["scenario"], name1, name2),
                        "question": fill(s["question"], name1, name2),
                    }
                )
    return rows


def names_rows() -> list[dict[str, str]]:
    return [{"name": name, "list": lst} for lst, names in NAMES.items() for name in names]


def _dd(rows: list[dict[str, Any]], features: datasets.Features) -> datasets.DatasetDict:
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows, features=features)})


_SOURCE = (
    f"The authors' repository [{REPO}](https://github.com/{REPO}) at commit `{COMMIT[:12]}` (MIT license, "
    "(c) 2024 sharonlevy). The name lists are not in the repository; they are transcribed from the paper's Table 2."
)
_HOW = (
    "Each CSV row is validated (required columns, E/T or E/O label, numeric unique id, topic among the 8 topics "
    "after case normalisation, NAME1/NAME2 placeholders). Topic casing is normalised ('Childcare'/'childcare' -> "
    "'childcare'). `scenario` is the scenario text; `question` is the authors' full wording (scenario + "
    f"{AUTHORS_SUFFIX!r}), taken from the human file and appended to the GPT-4 scenarios. Each scenario is filled "
    "for the 9 relationship types (first list = NAME1) with 20 name pairs each: mixed types g1_g2/g2_g1 use the same "
    "20 sampled pairs in both orders; same-gender types use 10 sampled pairs in original and reversed order. "
    "Sampling is seeded (seed 0) per scenario and pair of lists. `pair_key` links the two rows of a matched pair. "
    "Rows are ordered by (slot, scenario, relationship) so that the first N rows are whole slots."
)
_GAPS = (
    "The paper samples 20 of all name combinations per type but does not publish which; our sample (seed 0) differs "
    "from theirs, so per-name effects can differ. The paper reworded some prompts by hand when a model did not answer; "
    "the toolkit instead offers the paper's alternative wordings as separate tasks and reports unparsed answers as "
    "invalid. GPT-4 scenarios are labelled egalitarian/other (annotators did not agree on 'traditional')."
)


class _DemetBase(DatasetBuilder):
    """Shared reading and filling; subclasses pick the raw file and the scenario reader."""

    seed: ClassVar[int] = DEFAULT_SEED

    def __init__(self, seed: int | None = None) -> None:
        self.seed_value = self.seed if seed is None else seed

    def read_scenarios(self, files: dict[str, Path]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        scenarios = self.read_scenarios(files)
        return {
            "prompts": _dd(make_prompts(scenarios, self.seed_value), PROMPT_FEATURES),
            "scenarios": _dd(scenarios, SCENARIO_FEATURES),
        }


class DemetBuilder(_DemetBase):
    name = "demet"
    default_config = "prompts"
    raw_files = {
        "human": RawFile(
            key="demet/human_written_scenarios.csv",
            repo=REPO,
            commit=COMMIT,
            path="human_written_scenarios.csv",
            sha256="1909e732970c59bef74804c6b964bf19bda6454ec1af2fd6397ffbe61990a5ae",
        )
    }
    card = CardInfo(
        pretty_name="DeMET Prompts",
        license="mit",
        language=["en"],
        task_categories=["text-generation", "multiple-choice"],
        summary=(
            "DeMET Prompts (Levy et al., EMNLP 2024 Findings): 29 human-written scenarios of a disagreement between "
            "a married couple (8 topics, egalitarian/traditional), filled with women's, men's and gender-neutral "
            "names for 9 relationship types (20 name pairs each, 5,220 prompts). A model is asked who is right; "
            "the paired mixed-gender bias measures whether it favours one gender regardless of name order."
        ),
        citation=CITATION,
        source=_SOURCE,
        how_built=_HOW,
        known_gaps=_GAPS,
        homepage=f"https://github.com/{REPO}",
        tags=["bias", "fairness", "gender"],
        config_notes={
            "prompts": "29 scenarios x 9 relationship types x 20 name pairs, ordered by (slot, scenario, type)",
            "scenarios": "the 29 scenarios: topic, egalitarian/traditional, text and the authors' question",
            "names": "the 30 names of the paper's Table 2 with their list (woman/man/neutral)",
        },
    )

    def read_scenarios(self, files: dict[str, Path]) -> list[dict[str, Any]]:
        return read_human(files["human"])

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        configs = super().build(files)
        configs["names"] = _dd(names_rows(), NAME_FEATURES)
        return configs


class DemetGpt4Builder(_DemetBase):
    name = "demet_gpt4"
    default_config = "prompts"
    raw_files = {
        "gpt4": RawFile(
            key="demet/final_gpt4_scenarios.csv",
            repo=REPO,
            commit=COMMIT,
            path="final_gpt4_scenarios.csv",
            sha256="974981796dbc16b292199ca30f9cb95ae3feff402328eec1ad61d8c235c927b9",
        )
    }
    card = CardInfo(
        pretty_name="DeMET Prompts (GPT-4 scenarios)",
        license="mit",
        language=["en"],
        task_categories=["text-generation", "multiple-choice"],
        summary=(
            "The 80 GPT-4-generated relationship-conflict scenarios of DeMET Prompts (Levy et al., EMNLP 2024 "
            "Findings, Appendix C; 10 per topic, egalitarian/other), filled with the paper's name lists for 9 "
            "relationship types x 20 name pairs (14,400 prompts)."
        ),
        citation=CITATION,
        source=_SOURCE,
        how_built=_HOW,
        known_gaps=_GAPS,
        homepage=f"https://github.com/{REPO}",
        tags=["bias", "fairness", "gender"],
        config_notes={
            "prompts": "80 scenarios x 9 relationship types x 20 name pairs, ordered by (slot, scenario, type)",
            "scenarios": "the 80 scenarios: topic, egalitarian/other, text and the question with the authors' wording",
        },
    )

    def read_scenarios(self, files: dict[str, Path]) -> list[dict[str, Any]]:
        return read_gpt4(files["gpt4"])
