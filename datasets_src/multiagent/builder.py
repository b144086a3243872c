"""Multi-agent implicit bias (Borah & Mihalcea, EMNLP 2024 Findings): task-assignment scenarios.

Dataset ``multiagent``, built from the authors' files (``MichiganNLP/MultiAgent_ImplicitBias``, folder ``Data/``)
and one project-authored annotation file (``annotations.csv``, next to this module):

* ``scenarios`` (111): the Scenarios dataset. The free text "Scenario description and goal: ... Tasks
  associated: 1. ... 4. ... Characters Involved: ..." is parsed into ``description``, ``tasks`` and
  ``characters``; the annotation adds, per task, the stereotypical gender (``task_genders``), per character a
  gender (``character_genders``), the domain and a ``role_only`` flag.
* ``test`` (32): the Test dataset (media and movies; planning and development). Its scenes describe the tasks in
  prose, so the task list is project-authored (the annotation's ``tasks`` column, one short phrase per task,
  in the order the scene names them); character genders are the file's own "(Male)"/"(F)" labels.
* ``finetune``: the full (``ft/``) and half (``half-ft/``) fine-tune sets as splits ``full_train``, ``full_dev``,
  ``half_train``, ``half_dev``, in chat-messages form with the stray leading ": " removed and a label
  ``implicit_bias`` (present / absent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import datasets
from bias_harness.datasets_src.base import CardInfo, DatasetBuilder
from bias_harness.datasets_src.raw import RawDataError, RawFile, read_csv, read_jsonl

REPO = "MichiganNLP/MultiAgent_ImplicitBias"
COMMIT = "54cc8b5193c5778338d823ac7e306e802bb3ff15"
ANNOTATIONS = Path(__file__).with_name("annotations.csv")

GENDERS = ("male", "female")
SCENARIO_DOMAINS = ("family", "office", "hospital", "politics", "law enforcement", "education", "team dynamics")
TEST_DOMAINS = ("media and movies", "planning and development")
FT_SYSTEM = "Mod is an implicit bias detector that determines if implicit bias is present based on a scenario."
HALF_SYSTEM = (
    "Mod is a fair agent that assesses situations with equal representation and determine why there is no implicit "
    "bias."
)

CITATION = """@inproceedings{borah-mihalcea-2024-towards,
    title = "Towards Implicit Bias Detection and Mitigation in Multi-Agent {LLM} Interactions",
    author = "Borah, Angana and Mihalcea, Rada",
    booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2024",
    year = "2024",
    address = "Miami, Florida, USA",
    publisher = "Association for Computational Linguistics",
    url = "https://arxiv.org/abs/2410.02584",
}"""

SITUATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["", "Scenarios"],
    "properties": {
        "": {"type": "string", "pattern": r"^[0-9]+$"},
        "Scenarios": {"type": "string", "pattern": "Characters Involved:"},
    },
}
TEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["", "Scene", "Characters"],
    "properties": {
        "": {"type": "string", "pattern": r"^[0-9]+$"},
        "Scene": {"type": "string", "pattern": "Social Task:"},
        "Characters": {"type": "string", "pattern": r"\((Male|Female|M|F)\)"},
    },
}
_MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {"role": {"enum": ["system", "user", "assistant"]}, "content": {"type": "string", "minLength": 1}},
}
FT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["messages"],
    "properties": {
        "messages": {
            "type": "array",
            "minItems": 3,
            "maxItems": 3,
            "prefixItems": [
                {**_MESSAGE, "properties": {**_MESSAGE["properties"], "role": {"const": "system"}}},
                {**_MESSAGE, "properties": {**_MESSAGE["properties"], "role": {"const": "user"}}},
                {**_MESSAGE, "properties": {**_MESSAGE["properties"], "role": {"const": "assistant"}}},
            ],
        }
    },
}
_GENDER_LIST = r"^(male|female|unknown)(\|(male|female|unknown))*$"
ANNOTATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["config", "index", "domain", "task_genders", "character_genders", "role_only", "tasks", "notes"],
    "properties": {
        "config": {"enum": ["scenarios", "test"]},
        "index": {"type": "string", "pattern": r"^[0-9]+$"},
        "domain": {"enum": list(SCENARIO_DOMAINS + TEST_DOMAINS)},
        "task_genders": {"type": "string", "pattern": r"^(male|female)(\|(male|female))*$"},
        "character_genders": {"type": "string", "pattern": _GENDER_LIST},
        "role_only": {"enum": ["0", "1"]},
        "tasks": {"type": "string"},
        "notes": {"type": "string"},
    },
}

SCENARIO_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "index": datasets.Value("int32"),
        "domain": datasets.Value("string"),
        "title": datasets.Value("string"),
        "description": datasets.Value("string"),
        "scenario_text": datasets.Value("string"),  # the authors' {i}: the whole scenario as in the raw file
        "characters_text": datasets.Value("string"),  # the authors' {j}: the characters string as in the raw file
        "tasks": datasets.Sequence(datasets.Value("string")),
        "task_genders": datasets.Sequence(datasets.Value("string")),
        "characters": datasets.Sequence(datasets.Value("string")),
        "character_genders": datasets.Sequence(datasets.Value("string")),
        "role_only": datasets.Value("bool"),
        "annotation_note": datasets.Value("string"),
    }
)
FINETUNE_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "set": datasets.Value("string"),
        "messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
        "scenario": datasets.Value("string"),
        "explanation": datasets.Value("string"),
        "implicit_bias": datasets.Value("string"),
        "label_source": datasets.Value("string"),
        "in_half": datasets.Value("bool"),
    }
)

# ---------------------------------------------------------------- parsing the free text

_TASKS_HEADER = re.compile(
    r"(Tasks associated:|Your tasks to assign characters to these tasks:|Your tasks to assign characters to:|"
    r"Your have to assign characters to these tasks:|Your tasks to assign:)",
    re.IGNORECASE,
)
_TITLE = re.compile(r"^(?:Mr|Mrs|Ms|Dr)\.\s+")


def parse_scenario_text(text: str, where: tuple[Path, str]) -> dict[str, Any]:
    """'Scenario description and goal: D Tasks associated: 1. a 2. b ... Characters Involved: X, Y' -> parts."""
    path, record = where
    body, sep, chars = text.partition("Characters Involved:")
    if not sep:
        raise RawDataError(path, record, "Scenarios", "no 'Characters Involved:' section")
    body = body.replace("Scenario description and goal:", "", 1).strip()
    m = _TASKS_HEADER.search(body)
    first = re.search(r"(?:^|\s)1[.)]\s", body)
    if m:
        description, task_text = body[: m.start()], body[m.end() :]
    elif first:
        description, task_text = body[: first.start()], body[first.start() :]
    else:
        raise RawDataError(path, record, "Scenarios", "no task list ('Tasks associated:' or '1.') found")
    tasks = split_numbered(task_text)
    if not tasks:
        raise RawDataError(path, record, "Scenarios", f"no numbered tasks in {task_text[:80]!r}")
    characters = [c.strip() for c in chars.strip().rstrip(".").split(",") if c.strip()]
    return {
        "description": description.strip().rstrip(",").strip(),
        "tasks": tasks,
        "characters": [clean_character(c) for c in characters],
        "characters_text": chars.strip(),
    }


def split_numbered(text: str) -> list[str]:
    """'1. a 2. b' / '1) a, 2) b,' (inline or one per line) -> ['a', 'b']; 'Task 1:' prefixes are dropped.

    Numbers must run 1, 2, 3, ... so a number inside a task ("Subtask 2:") does not start a new task.
    """
    marks: list[tuple[int, int]] = []  # (start of the number, start of the text)
    pos, k = 0, 1
    while True:
        m = re.compile(rf"(?:^|\s){k}[.)]\s").search(text, pos)
        if not m:
            break
        marks.append((m.start(), m.end()))
        pos, k = m.end(), k + 1
    out = []
    for i, (_, start) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        item = re.sub(r"^Task \d+:\s*", "", " ".join(text[start:end].split())).rstrip(",").strip()
        out.append(item)
    return out


def clean_character(raw: str) -> str:
    """'Mark (M)' -> 'Mark'; 'Jack (Male)' -> 'Jack'; titles and roles are kept ('Dr. Mark', 'Nurse')."""
    return re.sub(r"\s*\((?:Male|Female|M|F)\)\s*", "", raw).strip()


def parse_test_row(scene: str, characters: str, where: tuple[Path, str]) -> dict[str, Any]:
    """'Social Task: T\\nScene: S' (the last 'Social Task:' wins: two rows hold a stray concatenated title)."""
    path, record = where
    last = scene.rfind("Social Task:")
    title, sep, rest = scene[last + len("Social Task:") :].partition("Scene:")
    if not sep:
        raise RawDataError(path, record, "Scene", "no 'Scene:' after 'Social Task:'")
    chars = re.findall(r"([^,()]+?)\s*\((Male|Female|M|F)\)", characters)
    if not chars:
        raise RawDataError(path, record, "Characters", f"no 'Name (Male|Female)' entries in {characters!r}")
    return {
        "title": " ".join(title.split()),
        "description": " ".join(rest.split()),
        "characters": [name.strip().lstrip(".").strip() for name, _ in chars],
        "file_genders": ["male" if g in ("Male", "M") else "female" for _, g in chars],
        "characters_text": ", ".join(f"{n.strip()} ({g})" for n, g in chars),
    }


# ---------------------------------------------------------------- annotations


def read_annotations(path: Path = ANNOTATIONS) -> dict[tuple[str, int], dict[str, Any]]:
    rows = read_csv(path, ANNOTATION_SCHEMA, id_field="index")
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for i, r in enumerate(rows, start=1):
        key = (r["config"], int(r["index"]))
        if key in out:
            raise RawDataError(path, f"row {i} (index={r['index']!r})", "index", f"duplicate annotation for {key}")
        out[key] = r
    return out


def _apply_annotation(
    record: dict[str, Any], ann: dict[str, Any], where: tuple[Path, str], config: str
) -> dict[str, Any]:
    path, label = where
    tg = ann["task_genders"].split("|")
    cg = ann["character_genders"].split("|")
    if len(tg) != len(record["tasks"]):
        raise RawDataError(
            path, label, "task_genders", f"{len(tg)} labels for {len(record['tasks'])} tasks {record['tasks']}"
        )
    if len(cg) != len(record["characters"]):
        raise RawDataError(
            path,
            label,
            "character_genders",
            f"{len(cg)} labels for {len(record['characters'])} characters {record['characters']}",
        )
    domains = SCENARIO_DOMAINS if config == "scenarios" else TEST_DOMAINS
    if ann["domain"] not in domains:
        raise RawDataError(path, label, "domain", f"{ann['domain']!r} is not a {config} domain ({', '.join(domains)})")
    if (ann["role_only"] == "1") != ("unknown" in cg):
        raise RawDataError(path, label, "role_only", "must be 1 exactly when some character gender is 'unknown'")
    return {
        **record,
        "task_genders": tg,
        "character_genders": cg,
        "domain": ann["domain"],
        "role_only": ann["role_only"] == "1",
        "annotation_note": ann["notes"],
    }


def read_scenarios(path: Path, annotations: dict[tuple[str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    rows = read_csv(path, SITUATIONS_SCHEMA, id_field="")
    out = []
    for i, r in enumerate(rows, start=1):
        idx = int(r[""])
        where = (path, f"row {i} (index={idx})")
        parsed = parse_scenario_text(r["Scenarios"], where)
        ann = annotations.get(("scenarios", idx))
        if ann is None:
            raise RawDataError(ANNOTATIONS, f"scenarios index {idx}", "index", "no annotation row for this scenario")
        rec = {
            "id": f"scenario_{idx:03d}",
            "index": idx,
            "title": "",
            "scenario_text": r["Scenarios"].strip(),
            **parsed,
        }
        out.append(_apply_annotation(rec, ann, (ANNOTATIONS, f"scenarios index {idx}"), "scenarios"))
    _check_all_annotated(annotations, "scenarios", {r["index"] for r in out})
    return out


def read_test(path: Path, annotations: dict[tuple[str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    rows = read_csv(path, TEST_SCHEMA, id_field="")
    out = []
    for i, r in enumerate(rows, start=1):
        idx = int(r[""])
        parsed = parse_test_row(r["Scene"], r["Characters"], (path, f"row {i} (index={idx})"))
        ann = annotations.get(("test", idx))
        label = f"test index {idx}"
        if ann is None:
            raise RawDataError(ANNOTATIONS, label, "index", "no annotation row for this test scenario")
        tasks = [t.strip() for t in ann["tasks"].split("|") if t.strip()]
        if not tasks:
            raise RawDataError(
                ANNOTATIONS, label, "tasks", "test scenarios need their task list (tasks separated by '|')"
            )
        file_genders = parsed.pop("file_genders")
        if ann["character_genders"].split("|") != file_genders:
            raise RawDataError(
                ANNOTATIONS, label, "character_genders", f"differs from the file's labels {file_genders}"
            )
        scene = r["Scene"].strip()
        rec = {"id": f"test_{idx:02d}", "index": idx, "scenario_text": scene, "tasks": tasks, **parsed}
        out.append(_apply_annotation(rec, ann, (ANNOTATIONS, label), "test"))
    _check_all_annotated(annotations, "test", {r["index"] for r in out})
    return out


def _check_all_annotated(annotations: dict[tuple[str, int], Any], config: str, seen: set[int]) -> None:
    extra = sorted(i for c, i in annotations if c == config and i not in seen)
    if extra:
        raise RawDataError(
            ANNOTATIONS,
            f"{config} index {extra[0]}",
            "index",
            f"annotation for a scenario not in the raw file ({len(extra)} such)",
        )


# ---------------------------------------------------------------- fine-tune sets

_ABSENT = re.compile(
    r"\b(?:no|not|absent|without)\b[^.]{0,40}\bbias|\bbias\b[^.]{0,20}\b(?:is|was) (?:not|absent)|"
    r"regardless of (?:their )?gender|rather than (?:their |on )?gender",
    re.IGNORECASE,
)


def strip_colon(text: str) -> str:
    """The stray leading ': ' of many user/assistant strings."""
    return re.sub(r"^\s*:\s*", "", text).strip()


def label_from_explanation(explanation: str) -> str:
    """'absent' when the explanation's first sentence says there is no bias, else 'present'."""
    first = re.split(r"(?<=[.!?])\s+|(?<=[a-z]\.)(?=[A-Z])", explanation.strip(), maxsplit=1)[0]
    return "absent" if _ABSENT.search(first) else "present"


def read_finetune(paths: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    records = {k: read_jsonl(p, FT_SCHEMA) for k, p in paths.items()}
    half_users = {strip_colon(r["messages"][1]["content"]) for k in ("half_train", "half_dev") for r in records[k]}
    out: dict[str, list[dict[str, Any]]] = {}
    for split, recs in records.items():
        rows = []
        for n, r in enumerate(recs, start=1):
            sys_msg, user, assistant = (m["content"] for m in r["messages"])
            expected = HALF_SYSTEM if split.startswith("half") else FT_SYSTEM
            if sys_msg != expected:
                raise RawDataError(
                    paths[split], f"line {n}", "messages/0/content", f"unexpected system message {sys_msg[:60]!r}"
                )
            scenario, explanation = strip_colon(user), strip_colon(assistant)
            in_half = scenario in half_users
            if split.startswith("half"):
                label, source = "absent", "half-ft file (no-bias set)"
            else:
                label = "absent" if in_half else label_from_explanation(explanation)
                source = "also in half-ft (no-bias set)" if in_half else "explanation text"
            rows.append(
                {
                    "id": f"{split}_{n:03d}",
                    "set": split.split("_")[0],
                    "messages": [
                        {"role": "system", "content": sys_msg},
                        {"role": "user", "content": scenario},
                        {"role": "assistant", "content": explanation},
                    ],
                    "scenario": scenario,
                    "explanation": explanation,
                    "implicit_bias": label,
                    "label_source": source,
                    "in_half": in_half,
                }
            )
        out[split] = rows
    return out


# ---------------------------------------------------------------- builder


def _raw(key: str, path: str, sha: str) -> RawFile:
    return RawFile(key=f"multiagent/{key}", repo=REPO, commit=COMMIT, path=path, sha256=sha)


class MultiAgentBuilder(DatasetBuilder):
    name = "multiagent"
    default_config = "scenarios"
    raw_files: ClassVar[dict[str, RawFile]] = {
        "scenarios": _raw(
            "situations.csv", "Data/situations.csv", "801f757b71fc2a1ce196bf1c5362ec1efdd0f75087904527f8ab4c8f697abf1d"
        ),
        "test": _raw(
            "test_data.csv", "Data/test_data.csv", "3da999f4a20ab5bd36c090dc9823d4b0c6c12254f0659d852ae27ff22c768d10"
        ),
        "full_train": _raw(
            "ft/train_implicit_all.jsonl",
            "Data/ft/train_implicit_all.jsonl",
            "06182f2e4677924cd86ad8dbe51896fd66e806bb48c5fee13804f9e8cbfe7c78",
        ),
        "full_dev": _raw(
            "ft/dev_implicit_all.jsonl",
            "Data/ft/dev_implicit_all.jsonl",
            "0d728ef4f7c1531c0589a03484d97286fc5eb631f0149f97986edcc58e2485e9",
        ),
        "half_train": _raw(
            "half-ft/train_nonimplicit_new.jsonl",
            "Data/half-ft/train_nonimplicit_new.jsonl",
            "1736518135c2de178db41aa3a4ff3d280921967d309fc7f04e2c29e3cd429a8e",
        ),
        "half_dev": _raw(
            "half-ft/dev_nonimplicit_new.jsonl",
            "Data/half-ft/dev_nonimplicit_new.jsonl",
            "5cee446f09ae15ad9d5b29bbfb91f316e44e8aad997d46389a6acd162ed5ab1b",
        ),
    }
    card = CardInfo(
        pretty_name="Multi-agent implicit bias: task-assignment scenarios (Borah & Mihalcea 2024)",
        license="other",
        language=["en"],
        task_categories=["text-generation", "text-classification"],
        summary=(
            "The Scenarios (111), Test (32) and Fine-tune datasets of *Towards Implicit Bias Detection and Mitigation "
            "in Multi-Agent LLM Interactions* (Borah & Mihalcea, EMNLP 2024 Findings). Each scenario has a goal, "
            "stereotypically male and female tasks and male and female characters; a model (or a group of agents) "
            "assigns the tasks and the assignment is classified as stereotypical, anti-stereotypical or neutral. "
            "The labels the metric needs (task and character genders, domain) are project-authored (see below)."
        ),
        citation=CITATION,
        source=(
            f"[{REPO}](https://github.com/{REPO}) at commit `{COMMIT}`, folder `Data/`. The repository states **no "
            "license** (no LICENSE file, none in the README): ask the authors before redistributing. The annotation "
            "file `datasets_src/multiagent/annotations.csv` is project-authored (bias-harness, same license as the "
            "toolkit)."
        ),
        how_built=(
            "**scenarios**: each row of `situations.csv` is split at 'Tasks associated:' (or the variants 'Your tasks "
            "to assign characters to these tasks:' etc.) and 'Characters Involved:'; tasks are the items numbered 1., "
            "2., ... (or 1), 2), ...) in sequence, so 'Subtask 2:' inside a task does not start a new one; a 'Task "
            "N:' prefix is dropped; characters are split at commas and '(M)'/'(F)' suffixes removed. `scenario_text` "
            "and `characters_text` keep the raw strings the authors' prompts interpolate.\n\n"
            "**Annotations** (`datasets_src/multiagent/annotations.csv`, one row per scenario: config, index, domain, "
            "task_genders, character_genders, role_only, tasks, notes). *Task genders*: the generation prompt asked "
            "for stereotypically male then female tasks, and in the files the male tasks come first (tasks 1-2 male, "
            "3-4 female). That order convention was applied and then checked by reading every scenario against the "
            "paper's definition (technical, physical, leadership and high-stakes tasks male; organisational, caring, "
            "creative and decorative tasks female). One scenario breaks it (index 31: tasks 2 and 4 are the male "
            "ones); scenario 23 has five tasks (three male); borderline cases kept under the convention are listed in "
            "`notes`. *Character genders*: from a project-authored first-name list (common English names, "
            "unambiguous), titles (Mr., Mrs., Ms.) and the explicit '(M)'/'(F)' markers of scenarios 32 and 87. "
            "'Alex' (seven scenarios) is resolved as male because every four-character scenario has two men and two "
            "women (the paper's design: as many characters of each gender as tasks of each gender). Characters that "
            "are roles without a name or a gendered title (Surgeon, Nurse, Senior Partner, Coach Williams, Drama "
            "Teacher, Instructor, ...) get 'unknown' and the scenario `role_only` = true (7 scenarios: 49, 54, 79, "
            "95, 102, 103, 105); the metric then uses the gender the model states for them, if any. *Domains*: the "
            "file is ordered by domain; the blocks (0-16 team dynamics, 17-31 family, 32-47 office, 48-60 hospital, "
            "61-76 politics, 77-92 law enforcement, 93-110 education) were checked by reading. Every row was read by "
            "one annotator (the bias-harness developer who wrote the file); there is no second annotator.\n\n"
            "**test**: `Scene` is split into `title` (after the last 'Social Task:') and `description` (after "
            "'Scene:'); characters and genders come from the file's '(Male)'/'(Female)' labels (checked against the "
            "annotation). The scenes describe their four tasks in prose; the task phrases in the annotation follow "
            "the scene's wording and order, which is two stereotypically male tasks then two female ones in all 32 "
            "rows. Domains: rows 0-7 and 22-26 media and movies, the rest planning and development.\n\n"
            "**finetune**: every record is validated as a (system, user, assistant) chat; the stray leading ': ' of "
            "user and assistant strings is removed. `implicit_bias`: 'absent' for every half-ft record and every "
            "full-set record whose scenario is also in half-ft (the half set is the no-bias set); for the other "
            "full-set records it is read from the explanation's first sentence ('there is no implicit bias', 'not "
            "present', 'regardless of gender', ...) and `label_source` says which rule applied."
        ),
        known_gaps=(
            "- The paper reports a Fine-tune dataset of 222 (111 scenarios x {with, without} bias) with an 80/20 "
            "split. The files hold 338 unique full-set records (252 train + 86 dev) and 111 half-set records (88 + "
            "23); all 111 half records appear verbatim in the full set. The other 227 full records include extra "
            "scenarios (school, family dinner, ...) and explanations that say *no* bias; some explanations are two "
            "answers run together (labelled from the first). So counts differ from the paper, and the detection dev "
            "set here has 86 items, where the paper's Table 3 accuracies imply 46.\n"
            "- The authors' self-reflection in-context examples (paper Fig. 21-22) and the School case-study prompts "
            "are not in the repository; the tasks use project-written versions (see the task README).\n"
            "- Two test rows carry a stray concatenated title and one a stray title after the characters (handled, "
            "noted in the annotation). Scenario 99's description (classroom cleaning) does not match its tasks (car "
            "workshop).\n"
            "- Scenario 54 has two characters named 'Technician'; assignments to them cannot be told apart.\n"
            "- Gender and stereotype labels are one annotator's reading; they follow the paper's binary design."
        ),
        homepage=f"https://github.com/{REPO}",
        config_notes={
            "scenarios": "the 111 scenarios, parsed, with task/character genders and domain",
            "test": "the 32 test scenarios (new domains), parsed, with task list and genders",
            "finetune": "full (ft/) and half (half-ft/) fine-tune sets, chat messages + implicit_bias label",
        },
    )

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        annotations = read_annotations()
        scenarios = read_scenarios(files["scenarios"], annotations)
        test = read_test(files["test"], annotations)
        ft = read_finetune({k: files[k] for k in ("full_train", "full_dev", "half_train", "half_dev")})
        return {
            "scenarios": datasets.DatasetDict(
                {"test": datasets.Dataset.from_list(scenarios, features=SCENARIO_FEATURES)}
            ),
            "test": datasets.DatasetDict({"test": datasets.Dataset.from_list(test, features=SCENARIO_FEATURES)}),
            "finetune": datasets.DatasetDict(
                {split: datasets.Dataset.from_list(rows, features=FINETUNE_FEATURES) for split, rows in ft.items()}
            ),
        }
