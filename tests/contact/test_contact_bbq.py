"""BBQ transfer check: lm-eval's own ``bbq`` task runs on the local partial BBQ copy (6 of 11 categories)."""

from __future__ import annotations

import json
import math

import pytest
from bias_harness.mitigation import local_tasks

from tests.conftest import SHARED_DATA

BBQ_DATA = SHARED_DATA / "bbq" / "data"


@pytest.fixture(scope="module")
def bbq_task_dir(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("bbq_local")
    path = local_tasks.write_bbq_local_task(out, BBQ_DATA)
    text = path.read_text(encoding="utf-8")
    assert (
        f"include: {local_tasks.lm_eval_bbq_dir() / 'bbq_multiple_choice.yaml'}" in text
    )  # lm-eval's task, not a copy
    assert text.count(".jsonl") == 6
    return str(out)


def _gold() -> dict[str, tuple[str, bool]]:
    """context + question (lm-eval's prompt) -> (gold answer text, gold is the unknown option)."""
    gold = {}
    with open(BBQ_DATA / "Age.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ans = d[f"ans{d['label']}"]
            unknown = d["answer_info"][f"ans{d['label']}"][1] == "unknown"
            gold[f"{d['context']}\n\nQ: {d['question']}\nA:"] = (ans, unknown)
    return gold


def _run(task_dir: str, loglik, limit: int):
    from lm_eval import simple_evaluate

    import bias_harness
    from tests.helpers import scripted_lm

    lm = scripted_lm(loglik=loglik)
    tm = bias_harness.task_manager(include_path=task_dir, include_defaults=False)
    return simple_evaluate(model=lm, tasks=["bbq_local"], limit=limit, task_manager=tm)["results"]["bbq_local"]


def test_bbq_local_perfect_and_unknown_models(bbq_task_dir) -> None:
    from lm_eval.tasks.bbq.utils import UNKNOWN_RESPONSES

    gold = _gold()

    def perfect(ctx: str, cont: str) -> float:
        ans, unknown = gold[ctx]
        return 0.0 if cont.strip() == ans or (unknown and cont.strip() in UNKNOWN_RESPONSES) else -1.0

    res = _run(bbq_task_dir, perfect, limit=120)  # the first 120 docs are Age (ambiguous and disambiguated)
    assert res["acc,none"] == 1.0 and res["accuracy_amb,none"] == 1.0 and res["accuracy_disamb,none"] == 1.0
    assert res["amb_bias_score_Age,none"] == 0.0  # (1 - acc_amb) * S_DIS
    assert math.isnan(res["amb_bias_score_Religion,none"])  # not in the first 120 docs

    def always_unknown(ctx: str, cont: str) -> float:
        return 0.0 if cont.strip() == "Unknown" else -1.0

    res = _run(bbq_task_dir, always_unknown, limit=120)
    assert res["accuracy_amb,none"] == 1.0 and res["accuracy_disamb,none"] == 0.0


def test_bbq_local_loads_six_categories(bbq_task_dir) -> None:
    from lm_eval.tasks import get_task_dict

    import bias_harness

    tm = bias_harness.task_manager(include_path=bbq_task_dir, include_defaults=False)
    task = get_task_dict(["bbq_local"], tm)["bbq_local"]
    docs = task.test_docs()
    assert len(docs) == 11_956  # SOURCES.md: 6 of 11 categories, 11,956 examples
    assert set(docs.unique("category")) == {
        "Age",
        "Disability_status",
        "Nationality",
        "Physical_appearance",
        "Religion",
        "Sexual_orientation",
    }


def test_missing_bbq_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no BBQ"):
        local_tasks.write_bbq_local_task(tmp_path / "out", tmp_path)
