"""Contact metrics: bias % and contact effects on hand-worked answers, answer parsing, end-to-end runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from bias_harness.plugins import stats
from bias_harness.plugins.contact import metrics as cm

# Four prompt sets, hand-worked: (none, positive, negative) biased flags; -1 = invalid answer.
HAND = {"s1": (1, 0, 1), "s2": (0, 0, 1), "s3": (1, -1, 1), "s4": (0, 1, 0)}
ITEMS = [(sid, contact, flags[i]) for sid, flags in HAND.items() for i, contact in enumerate(cm.CONTACTS)]


def test_bias_pct_and_effects_hand_worked() -> None:
    out = cm.summarize(ITEMS, iters=200)
    assert out["bias_pct_none"] == pytest.approx(50.0)  # 2 of 4
    assert out["bias_pct_positive"] == pytest.approx(100 / 3)  # 1 of 3 valid (s3 invalid)
    assert out["bias_pct_negative"] == pytest.approx(75.0)  # 3 of 4
    assert out["effect_positive"] == pytest.approx(100 / 3 - 50)
    assert out["effect_negative"] == pytest.approx(25.0)
    assert out["invalid_rate"] == pytest.approx(1 / 12)
    for key in cm.BIAS_KEYS + cm.EFFECT_KEYS:
        assert out[f"{key}_ci_lo"] <= out[key] <= out[f"{key}_ci_hi"]
    # the CI is a bootstrap over prompt sets: it agrees with stats.bootstrap_ci resampling the sets themselves
    rng = np.random.default_rng(7)
    many = [
        (f"s{i}", c, int(rng.random() < p))
        for i in range(400)
        for c, p in zip(cm.CONTACTS, (0.5, 0.3, 0.7), strict=True)
    ]
    fast = cm.summarize(many, iters=2000)
    mat = np.array([[b for _, _, b in many[i : i + 3]] for i in range(0, len(many), 3)], dtype=float)
    lo, hi = stats.bootstrap_ci(
        list(mat), lambda m: 100 * (np.mean([r[2] for r in m]) - np.mean([r[0] for r in m])), iters=2000
    )
    assert fast["effect_negative_ci_lo"] == pytest.approx(lo, abs=1.0) and fast[
        "effect_negative_ci_hi"
    ] == pytest.approx(hi, abs=1.0)
    assert fast["effect_negative_ci_hi"] - fast["effect_negative_ci_lo"] == pytest.approx(hi - lo, rel=0.1)
    # every aggregation reads the same summary; JSON round-trip (lists instead of tuples) gives the same numbers
    assert cm.agg_bias_pct_negative(json.loads(json.dumps(ITEMS))) == pytest.approx(75.0)
    assert cm.agg_invalid_rate(ITEMS) == pytest.approx(1 / 12)


def test_empty_contact_type_is_nan() -> None:
    out = cm.summarize([("s1", "none", 1), ("s2", "none", 0)], iters=50)
    assert out["bias_pct_none"] == 50.0 and math.isnan(out["bias_pct_positive"]) and math.isnan(out["effect_positive"])


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("Yes, you should.", ["Yes", "No"], 0),
        (" no.", ["Yes", "No"], 1),
        ("Nope, I know nothing", ["Yes", "No"], None),  # "Nope"/"nothing"/"know" are not the word "no"
        ("It is unlikely.", ["Likely", "Unlikely"], 1),
        ("Likely, not unlikely", ["Likely", "Unlikely"], 0),  # a negated "unlikely" names no option
        ("Not likely.", ["Likely", "Unlikely"], 1),  # a negated option is never the option it negates
        ("Not frequently.", ["Mostly", "Rarely"], 1),  # "frequently" = Mostly, negated
        ("Not really likely, no.", ["Likely", "Unlikely"], 1),
        ("Not unlikely.", ["Likely", "Unlikely"], None),  # litotes: neither option
        ("Not often.", ["Mostly", "Rarely"], 1),  # bare "often" counts only negated (echoes carry "How often")
        ("Rarely. Mostly never.", ["Mostly", "Rarely"], None),
        ("I cannot answer that.", ["Mostly", "Rarely"], None),
        ("Most of the time, you should work with them.", ["Mostly", "Rarely"], 0),  # real SmolLM2 phrasing
        ("Most often.", ["Mostly", "Rarely"], 0),
        ("Hardly ever, but most of the time later", ["Mostly", "Rarely"], None),  # both, through synonyms
        ("How often should I? Not sure.", ["Mostly", "Rarely"], None),  # an echo of the question is no answer
        ("", ["Yes", "No"], None),
    ],
)
def test_parse_answer(text, options, expected) -> None:
    assert cm.parse_answer(text, options) == expected


def test_process_results() -> None:
    doc = {"prompt_set_id": "c02-000", "contact_type": "positive", "biased_option": 0, "options": ["Yes", "No"]}
    assert cm.process_results(doc, [(-0.5, False), (-2.0, True)])["bias_pct_positive"][:3] == ("c02-000", "positive", 1)
    assert cm.process_results(doc, [(-3.0, False), (-2.0, True)])["invalid_rate"][:3] == ("c02-000", "positive", 0)
    assert cm.process_results_gen(doc, ["Sorry, I can't."])["effect_negative"][:3] == ("c02-000", "positive", -1)
    # scale, action pair (template 2 = the avoidance question of cell 0) and the option given
    full = {**doc, "scale": "certainty", "template_id": 2, "axis": "age", "descriptor": "old"}
    assert cm.process_results_gen(full, ["No"])["invalid_rate"][3:] == ("certainty", "certainty|0|age|old|positive", 1)
    assert set(cm.process_results_gen(doc, ["No"])) == set(cm.METRIC_KEYS)


def test_breakdown() -> None:
    recs = [
        {"axis": a, "contact_type": c, "biased": b}
        for a, c, b in [("age", "none", 1), ("age", "none", 0), ("age", "positive", -1), ("religion", "negative", 1)]
    ]
    out = cm.breakdown(recs, ["axis"])
    assert out[("age",)]["bias_pct_none"] == 50.0 and math.isnan(out[("age",)]["bias_pct_positive"])
    assert (
        out[("age",)]["n"] == 3 and out[("age",)]["invalid"] == 1 and out[("religion",)]["bias_pct_negative"] == 100.0
    )


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def manager():
    import bias_harness

    return bias_harness.task_manager(include_defaults=False)


def test_load_docs_scale_and_query() -> None:
    dd = cm.load_docs("contact", "mini", scale="frequency")
    ds = dd["test"]
    assert len(ds) == 7020 // 3 and set(ds.unique("scale")) == {"frequency"}
    assert ds[0]["query"] == ds[0]["prompt"] + " Answer with Mostly or Rarely."
    assert (
        cm.load_docs("contact", "mini", scale="frequency", instruction_suffix="false")["test"][0]["query"]
        == ds[0]["prompt"]
    )
    with pytest.raises(ValueError, match="scale 'sometimes'"):
        cm.load_docs("contact", "mini", scale="sometimes")


def test_contact_mini_gen_scripted() -> None:
    """A model that is biased exactly on negative contact and on no-contact negative actions, and refuses nonce."""
    from lm_eval import simple_evaluate

    import bias_harness
    from tests.helpers import scripted_lm

    manager = bias_harness.task_manager(include_defaults=False, metadata={"breakdown": True})  # the bias % CIs too

    docs = {cm.doc_to_text_gen(d): d for d in cm.load_docs("contact", "mini")["test"]}

    def answer(ctx: str) -> str:
        doc = docs[ctx]
        if doc["axis"] == "nonce":
            return "I cannot say."
        biased = doc["contact_type"] == "negative" or (
            doc["contact_type"] == "none" and doc["action_type"] == "negative"
        )
        return doc["options"][doc["biased_option"] if biased else 1 - doc["biased_option"]] + ", I think."

    lm = scripted_lm(answer=answer)
    res = simple_evaluate(model=lm, tasks=["contact_mini_gen"], task_manager=manager)["results"]["contact_mini_gen"]
    assert lm.calls == [("generate_until", 7020)]  # one batched call
    assert res["bias_pct_none,none"] == pytest.approx(50.0)
    assert res["bias_pct_positive,none"] == pytest.approx(0.0)
    assert res["bias_pct_negative,none"] == pytest.approx(100.0)
    assert res["effect_positive,none"] == pytest.approx(-50.0) and res["effect_negative,none"] == pytest.approx(50.0)
    assert res["invalid_rate,none"] == pytest.approx(1 / 13)  # mini is balanced over the 13 axes
    assert res["bias_pct_none_ci_lo,none"] < 50 < res["bias_pct_none_ci_hi,none"]
    # positive/negative are constant (0 / 100) in every resample, so the effect CIs mirror the CI of bias_pct_none
    assert res["effect_negative_ci_lo,none"] == pytest.approx(100 - res["bias_pct_none_ci_hi,none"])
    assert res["effect_positive_ci_hi,none"] == pytest.approx(-res["bias_pct_none_ci_lo,none"])


def test_contact_mini_tiny_model(manager, tiny_causal_lm, tmp_path) -> None:
    """The tiny random GPT-2 on the first 60 docs: the reported bias % equals the one recomputed from the logged
    samples."""
    from lm_eval import simple_evaluate

    res = simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_causal_lm},dtype=float32",
        tasks=["contact_mini"],
        limit=60,
        task_manager=manager,
        device="cpu",
        batch_size=16,
        log_samples=True,
    )
    got = res["results"]["contact_mini"]
    flags = {c: [] for c in cm.CONTACTS}
    for s in res["samples"]["contact_mini"]:
        lls = [r[0] for r in s["filtered_resps"]]
        flags[s["doc"]["contact_type"]].append(int(np.argmax(lls)) == s["doc"]["biased_option"])
    assert sum(len(v) for v in flags.values()) == 60
    for contact, vals in flags.items():
        assert got[f"bias_pct_{contact},none"] == pytest.approx(100 * sum(vals) / len(vals))
    assert got["invalid_rate,none"] == 0.0


def test_tasks_and_groups_are_registered(manager) -> None:
    names = set(manager.all_tasks)
    scales = ("certainty", "likelihood", "frequency", "mini")
    assert {f"contact_{s}" for s in scales} | {f"contact_{s}_gen" for s in scales} | {"contact", "contact_gen"} <= names
    import yaml

    from bias_harness import tasks_dir

    suite = yaml.safe_load((Path(tasks_dir()) / "bias_harness.yaml").read_text(encoding="utf-8"))
    assert "contact" in suite["task"]


@pytest.mark.slow
def test_contact_mini_smollm2(manager, smollm2_path) -> None:
    """SmolLM2 on 30 complete prompt sets of contact_mini: reported bias % = the one recomputed from its
    log-likelihoods."""
    from lm_eval import simple_evaluate

    res = simple_evaluate(
        model="hf",
        model_args=f"pretrained={smollm2_path},dtype=float32",
        tasks=["contact_mini"],
        limit=90,
        task_manager=manager,
        device="cpu",
        batch_size=32,
        log_samples=True,
    )
    got = res["results"]["contact_mini"]
    samples = res["samples"]["contact_mini"]
    assert len({s["doc"]["prompt_set_id"] for s in samples}) == 30
    for contact in cm.CONTACTS:
        flags = [
            int(np.argmax([r[0] for r in s["filtered_resps"]])) == s["doc"]["biased_option"]
            for s in samples
            if s["doc"]["contact_type"] == contact
        ]
        assert got[f"bias_pct_{contact},none"] == pytest.approx(100 * sum(flags) / len(flags))
