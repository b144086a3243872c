"""Multi-agent implicit bias: the dataset builder, the annotation file, per-run documents and the task YAMLs."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest
import yaml
from bias_harness.datasets_src.multiagent import builder
from bias_harness.datasets_src.raw import RawDataError
from bias_harness.plugins.multiagent import metrics, prompts

from bias_harness import tasks_dir


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    import datasets
    from bias_harness.datasets_src.base import build_dataset
    from bias_harness.datasets_src.registry import get_builder

    folder = build_dataset(get_builder("multiagent"), tmp_path_factory.mktemp("built"))
    return {cfg: datasets.load_dataset(str(folder), cfg) for cfg in ("scenarios", "test", "finetune")}, folder


def test_counts_and_card(built):
    ds, folder = built
    assert len(ds["scenarios"]["test"]) == 111 and len(ds["test"]["test"]) == 32
    assert {k: len(v) for k, v in ds["finetune"].items()} == {
        "full_train": 252,
        "full_dev": 86,
        "half_train": 88,
        "half_dev": 23,
    }
    card = (folder / "README.md").read_text()
    assert "222" in card and "338" in card and "datasets_src/multiagent/annotations.csv" in card


def test_scenarios_parsed_and_annotated(built):
    ds, _ = built
    rows = {r["index"]: r for r in ds["scenarios"]["test"]}
    # inline '1)' numbering and a 'Task N:' prefix
    assert rows[28]["tasks"] == ["Hanging the outdoor lights", "Chopping firewood", "Baking cookies", "Wrapping gifts"]
    assert rows[19]["tasks"][0].startswith("Adorning the exterior")
    # 'Subtask 2:' inside a task does not start a new task
    assert len(rows[38]["tasks"]) == 4 and rows[38]["tasks"][1].startswith("Subtask 1: Identify")
    assert rows[32]["characters"] == ["Mark", "Lisa", "Tom", "Karen"]  # '(M)' markers removed
    assert rows[23]["task_genders"] == ["male", "male", "male", "female", "female"]
    assert rows[31]["task_genders"] == ["female", "male", "female", "male"]
    assert rows[49]["role_only"] and rows[49]["character_genders"] == ["unknown"] * 4
    assert rows[93]["character_genders"] == ["female", "male", "male", "female", "female"]  # Mrs. Allen + 4 students
    domains = collections.Counter(r["domain"] for r in rows.values())
    assert domains == {
        "team dynamics": 17,
        "family": 15,
        "office": 16,
        "hospital": 13,
        "politics": 16,
        "law enforcement": 16,
        "education": 18,
    }
    for r in rows.values():  # the paper's design: as many tasks of each stereotype as characters of each gender
        if len(r["characters"]) == 4 and not r["role_only"]:
            assert r["character_genders"].count("male") == 2, r["index"]


def test_test_set_parsed(built):
    ds, _ = built
    rows = {r["index"]: r for r in ds["test"]["test"]}
    assert rows[8]["title"] == "Community Garden Renovation"  # stray concatenated title dropped
    assert rows[26]["characters"] == ["Brandon", "Keith", "Heather", "Angela"]  # stray title after the characters
    assert rows[0]["characters_text"] == "Jack (Male), Jill (Female)"
    assert all(r["task_genders"] == ["male", "male", "female", "female"] for r in rows.values())
    assert collections.Counter(r["domain"] for r in rows.values()) == {
        "media and movies": 13,
        "planning and development": 19,
    }


def test_finetune_cleaned_and_labelled(built):
    ds, _ = built
    dev = ds["finetune"]["full_dev"]
    assert not any(r["scenario"].startswith(":") or r["explanation"].startswith(":") for r in dev)
    assert [m["role"] for m in dev[0]["messages"]] == ["system", "user", "assistant"]
    assert collections.Counter(dev["implicit_bias"]) == {"present": 46, "absent": 40}
    assert set(ds["finetune"]["half_dev"]["implicit_bias"]) == {"absent"}
    assert builder.label_from_explanation("There is no implicit gender bias in this scenario because ...") == "absent"
    assert builder.label_from_explanation("The men get the technical work, reflecting a bias.") == "present"


def test_bad_annotation_names_file_record_field(tmp_path: Path, built):
    ann = builder.read_annotations()
    ann[("scenarios", 5)] = {**ann[("scenarios", 5)], "task_genders": "male|female"}
    with pytest.raises(RawDataError) as err:
        builder.read_scenarios(builder.MultiAgentBuilder().fetch_all()["scenarios"], ann)
    assert err.value.field == "task_genders" and "scenarios index 5" in err.value.record
    bad = tmp_path / "ann.csv"
    text = builder.ANNOTATIONS.read_text().replace("scenarios,0,team dynamics", "scenarios,0,circus", 1)
    bad.write_text(text)
    with pytest.raises(RawDataError) as err2:
        builder.read_annotations(bad)
    assert err2.value.field == "domain" and "row 1" in err2.value.record


def test_runs_expansion(built):
    ds, _ = built
    base = ds["scenarios"]["test"].select(range(2))
    fixed = prompts.expand_runs(base, runs=3, seed=0)  # default: the dataset's order in every run (paper Sec. 5)
    assert {tuple(o) for o in fixed["character_order"]} == {(0, 1, 2, 3)}
    out = prompts.expand_runs(base, runs=3, seed=0, agent_order="permuted")
    assert out["doc_key"] == [
        "scenario_000#run0",
        "scenario_001#run0",
        "scenario_000#run1",
        "scenario_001#run1",
        "scenario_000#run2",
        "scenario_001#run2",
    ]
    assert out[0]["character_order"] == [0, 1, 2, 3] and out[0]["agent_names"][0] == "John (Male)"
    orders = {tuple(r["character_order"]) for r in out if r["id"] == "scenario_000"}
    assert len(orders) >= 2  # later runs permute the characters
    again = prompts.expand_runs(base, runs=3, seed=0, agent_order="permuted")
    assert again["character_order"] == out["character_order"]  # seeded
    r = out[2]
    assert r["scenario_prompt"].endswith("Characters Involved: " + ", ".join(r["run_characters"]))
    assert r["run_genders"] == [base[0]["character_genders"][k] for k in r["character_order"]]


def test_prompts_use_authors_templates(built):
    ds, _ = built
    doc = prompts.expand_runs(ds["test"]["test"].select([0]), runs=1)[0]
    text = prompts.nointeraction_prompt(doc)
    assert text.startswith("Given a scene and tasks in Social Task: Live News Broadcast Chaos\nScene: During")
    assert "Task 4: Person assigned: <person, gender>" in text and "Task 5" not in text
    sr_ice = prompts.nointeraction_prompt(doc, "sr_ice")
    assert prompts.IMPLICIT_BIAS_DEFINITION in sr_ice and sr_ice.count("Implicit bias: present") == 3
    assert sr_ice.count("Implicit bias: absent") == 3


def _load(path: Path) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(path.read_text(), Loader=Loader)


def _metric_names(path: Path) -> list[str]:
    return [m["metric"] for m in _load(path)["metric_list"]]


@pytest.mark.parametrize(
    ("base", "responses", "domains"),
    [
        ("_nointeraction_yaml", ["all_responses"], metrics.SCENARIO_DOMAINS),
        ("_test_nointeraction_yaml", ["all_responses"], metrics.TEST_DOMAINS),
        ("_interaction_yaml", ["first_response", "last_response"], metrics.SCENARIO_DOMAINS),
        ("_test_interaction_yaml", ["first_response", "last_response"], metrics.TEST_DOMAINS),
        ("_test_interaction_sr_yaml", ["first_response", "reflection_response", "last_response"], metrics.TEST_DOMAINS),
    ],
)
def test_yaml_metric_lists_match_code(base, responses, domains):
    from bias_harness.plugins.breakdown import breakdown_entries
    from lm_eval.tasks._yaml_loader import load_yaml

    path = Path(tasks_dir()) / "multiagent" / base
    # headline metric_list of the base + the breakdown table each including task's metadata names
    tasks = [p for p in sorted(path.parent.glob("*.yaml")) if _load(p).get("include") == base]
    assert tasks and _metric_names(path) == metrics.headline_keys(responses)
    for task in tasks:
        cfg = load_yaml(task)
        entries = cfg["metric_list"] + breakdown_entries(cfg)
        assert [m["metric"] for m in entries] == metrics.metric_keys(responses, domains), task.name
        for m in entries:  # one aggregation per kind of metric: the one the code gives the name
            assert m["aggregation"] is metrics.aggregation(m["metric"]), (task.name, m["metric"])
            assert m["higher_is_better"] == m["metric"].endswith(("_n_valid", "_pct_neutral")), m
    assert re.search(
        r"custom_dataset: !function bias_harness\.plugins\.multiagent\.prompts\.load_runs", path.read_text()
    )
