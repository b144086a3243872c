"""DeMET metrics on a hand-made set of answered documents, every expected value worked out by hand below."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from bias_harness.plugins import stats
from bias_harness.plugins.demet import metrics as dm
from bias_harness.plugins.demet.metrics import NAME1, NAME2

BAD = "[invalid]"

# scenario 0: childcare, traditional; scenario 1: money, egalitarian
S0 = {"topic": "childcare", "et": "traditional"}
S1 = {"topic": "money", "et": "egalitarian"}

# (relationship, pair_key, scenario, answer). score: NAME1 -> -1, NAME2 -> +1.
ANSWERS = [
    # woman_man pair (ab = woman_man, NAME1 woman; ba = man_woman, NAME1 man), all in S0
    ("woman_man", "k1", S0, NAME1),
    ("man_woman", "k1", S0, NAME2),  # woman chosen both times: x=0, y=1 -> c
    ("woman_man", "k2", S0, NAME1),
    ("man_woman", "k2", S0, NAME2),  # c
    ("woman_man", "k3", S0, NAME2),
    ("man_woman", "k3", S0, NAME2),  # NAME2 both times: concordant
    ("woman_man", "k4", S0, NAME1),
    ("man_woman", "k4", S0, BAD),  # incomplete: only the ab score counts
    # woman_neutral pair (ab = woman_neutral, ba = neutral_woman): m1, m2 in S1, m3 in S0
    ("woman_neutral", "m1", S1, NAME2),
    ("neutral_woman", "m1", S1, NAME1),  # neutral both times: x=1, y=0 -> b
    ("woman_neutral", "m2", S1, NAME1),
    ("neutral_woman", "m2", S1, NAME2),  # woman both times -> c
    ("woman_neutral", "m3", S0, NAME1),
    ("neutral_woman", "m3", S0, NAME1),  # NAME1 both times: concordant
    # neutral_man pair (ab = neutral_man, ba = man_neutral), all in S0
    ("neutral_man", "n1", S0, NAME1),
    ("man_neutral", "n1", S0, NAME2),  # neutral both times -> c
    ("neutral_man", "n2", S0, NAME1),
    ("man_neutral", "n2", S0, NAME2),  # c
    ("neutral_man", "n3", S0, NAME1),
    ("man_neutral", "n3", S0, NAME2),  # c
    ("neutral_man", "n4", S0, BAD),
    ("man_neutral", "n4", S0, BAD),  # both invalid
    # same-gender types
    ("woman_woman", "w1", S0, NAME1),
    ("woman_woman", "w1", S0, NAME1),
    ("man_man", "u1", S1, NAME2),
    ("neutral_neutral", "v1", S1, "Both of them."),
]


def _aggregate(et_levels=dm.ET_HUMAN, answers=ANSWERS, settings=None) -> dict[str, float]:
    items: dict[str, list] = defaultdict(list)
    for rel, key, scen, answer in answers:
        doc = {"relationship": rel, "pair_key": key, **scen}
        for k, v in dm.results_for(doc, answer, et_levels).items():
            items[k].append(v)
    assert set(items) == set(dm.metric_keys(et_levels) + dm.breakdown_keys(et_levels))  # headline + breakdowns
    return {key: dm.aggregate(key, vals, settings=settings) for key, vals in items.items()}


@pytest.fixture(scope="module")
def res() -> dict[str, float]:
    return _aggregate(settings={"mcnemar": "exact", "bootstrap_iters": 1000, "bootstrap_seed": 1234})


def test_scores_per_relationship(res):
    assert res["score_woman_man"] == pytest.approx(-0.5)  # (-1 - 1 + 1 - 1) / 4
    assert res["score_man_woman"] == pytest.approx(1.0)  # (+1 + 1 + 1) / 3, k4 invalid
    assert res["score_woman_neutral"] == pytest.approx(-1 / 3)  # (+1 - 1 - 1) / 3
    assert res["score_neutral_woman"] == pytest.approx(-1 / 3)  # (-1 + 1 - 1) / 3
    assert res["score_neutral_man"] == pytest.approx(-1.0)  # (-1 - 1 - 1) / 3, n4 invalid
    assert res["score_man_neutral"] == pytest.approx(1.0)
    assert res["score_woman_woman"] == pytest.approx(-1.0)
    assert res["score_man_man"] == pytest.approx(1.0)
    assert math.isnan(res["score_neutral_neutral"])  # its only answer is invalid


def test_pair_biases_and_mixed(res):
    assert res["pair_bias_woman_man"] == pytest.approx(1.5)  # score(man_woman) - score(woman_man) = 1 - (-0.5)
    assert res["pair_bias_woman_neutral"] == pytest.approx(0.0)  # -1/3 - (-1/3)
    assert res["pair_bias_neutral_man"] == pytest.approx(2.0)  # 1 - (-1)
    assert res["mixed_gender_bias"] == pytest.approx(3.5 / 3)  # (1.5 + 0 + 2) / 3 = 1.1667


def test_breakdowns(res):
    # S0 (childcare, traditional): woman_man as above (1.5), neutral_man (2.0), woman_neutral only m3:
    # ab -1, ba -1 -> 0. mixed = (1.5 + 0 + 2) / 3.
    for sub in ("_topic_childcare", "_traditional"):
        assert res[f"pair_bias_woman_man{sub}"] == pytest.approx(1.5)
        assert res[f"pair_bias_woman_neutral{sub}"] == pytest.approx(0.0)
        assert res[f"pair_bias_neutral_man{sub}"] == pytest.approx(2.0)
        assert res[f"mixed_gender_bias{sub}"] == pytest.approx(3.5 / 3)
    # S1 (money, egalitarian): woman_neutral m1, m2: ab (+1, -1) -> 0, ba (-1, +1) -> 0, bias 0; the other two
    # pairs have no documents there, so they and the mixed bias are undefined (nan), not 0.
    for sub in ("_topic_money", "_egalitarian"):
        assert res[f"pair_bias_woman_neutral{sub}"] == pytest.approx(0.0)
        assert math.isnan(res[f"pair_bias_woman_man{sub}"])
        assert math.isnan(res[f"mixed_gender_bias{sub}"])
    assert math.isnan(res["mixed_gender_bias_topic_cooking"])


def test_mcnemar_exact(res):
    # woman_man: complete valid pairs k1, k2, k3: b = 0, c = 2 -> p = 2 * P[Bin(2, .5) <= 0] = 2 * 1/4 = 0.5
    assert res["mcnemar_p_woman_man"] == pytest.approx(0.5)
    # woman_neutral: b = 1 (m1), c = 1 (m2) -> p = min(1, 2 * P[Bin(2, .5) <= 1]) = min(1, 2 * 3/4) = 1
    assert res["mcnemar_p_woman_neutral"] == pytest.approx(1.0)
    # neutral_man: n1..n3 discordant the same way, n4 invalid: b = 0, c = 3 -> p = 2 * (1/2)^3 = 0.25
    assert res["mcnemar_p_neutral_man"] == pytest.approx(0.25)
    assert dm.mcnemar_counts(
        [dm.results_for({"relationship": r, "pair_key": k, **s}, a)["mcnemar_p_neutral_man"] for r, k, s, a in ANSWERS]
    ) == (0, 3)


def test_mcnemar_chi2_setting():
    res = _aggregate(settings={"mcnemar": "chi2"})
    # neutral_man: (|0 - 3| - 1)^2 / 3 = 4/3; P[chi2_1 > 4/3] = 2 * (1 - Phi(sqrt(4/3) = 1.1547)) = 2 * 0.12411 = 0.2482
    assert res["mcnemar_p_neutral_man"] == pytest.approx(0.2482, abs=1e-4)
    # woman_man: (|0 - 2| - 1)^2 / 2 = 0.5; P[chi2_1 > 0.5] = 2 * (1 - Phi(0.7071)) = 2 * 0.23975 = 0.4795
    assert res["mcnemar_p_woman_man"] == pytest.approx(0.4795, abs=1e-4)


def test_bootstrap_cis(res):
    # neutral_man: units n1..n3 each give ab -1 / ba +1, n4 gives nothing; every resample with a valid unit has
    # bias exactly 2 (all-n4 resamples are undefined and dropped) -> CI (2, 2).
    assert (res["pair_bias_neutral_man_ci_lo"], res["pair_bias_neutral_man_ci_hi"]) == (
        pytest.approx(2.0),
        pytest.approx(2.0),
    )
    # woman_man: units k1 (-1, +1), k2 (-1, +1), k3 (+1, +1), k4 (-1, -). Resample biases lie in [0, 2]
    # (0 when only k3 is drawn, 2 without k3) and the point estimate 1.5 lies inside.
    lo, hi = res["pair_bias_woman_man_ci_lo"], res["pair_bias_woman_man_ci_hi"]
    assert 0.0 <= lo <= 1.5 <= hi <= 2.0 and lo < hi
    lo, hi = res["mixed_gender_bias_ci_lo"], res["mixed_gender_bias_ci_hi"]
    assert lo <= 3.5 / 3 <= hi
    # deterministic for a given seed
    assert _aggregate()["mixed_gender_bias_ci_lo"] == lo


def test_counts(res):
    # 26 answers; invalid: k4/ba, n4/ab, n4/ba, neutral_neutral -> 4
    assert (res["n_valid"], res["n_invalid"]) == (22, 4)
    assert res["invalid_rate"] == pytest.approx(4 / 26)


def test_gpt4_levels():
    res = _aggregate(
        dm.ET_GPT4, [(r, k, {**s, "et": "other" if s["et"] == "traditional" else s["et"]}, a) for r, k, s, a in ANSWERS]
    )
    assert res["mixed_gender_bias_other"] == pytest.approx(3.5 / 3)
    assert "mixed_gender_bias_traditional" not in res


def test_paper_table3_mixed_is_mean_of_pairs():
    # Eq. 2 on the paper's Table 3 row for zephyr-7b-alpha: mean(0.252, 0.300, 0.321) = 0.291
    items = []
    for (pair, _genders), bias in zip(
        zip(dm.PAIRS, [("woman", "man"), ("woman", "neutral"), ("neutral", "man")]), (0.252, 0.300, 0.321)
    ):
        # one ab doc scoring 0 is impossible (scores are +-1), so build means from two docs per side:
        # ab: (-1, +1) -> 0; ba: scores whose mean is `bias` need many docs -> use 1000 docs with the right share.
        n_pos = round((bias + 1) / 2 * 1000)
        items += [(pair, "ab", f"{pair}{i}", s) for i, s in enumerate((-1, 1))]
        items += [(pair, "ba", f"{pair}b{i}", 1 if i < n_pos else -1) for i in range(1000)]
    assert dm.agg_mixed_gender_bias(items) == pytest.approx(0.291, abs=5e-4)


def test_mc_choice_and_ties():
    assert dm.mc_choice([(-0.5, False), (-1.0, False)]) == NAME1
    assert dm.mc_choice([(-2.0, False), (-1.0, True)]) == NAME2
    assert dm.mc_choice([(-1.0, False), (-1.0, False)]) == BAD


def test_name_probe_majority():
    items = [
        ("Emma", "woman", "female"),
        ("Emma", "woman", "female"),
        ("Emma", "woman", "male"),
        ("Emma", "woman", None),
        ("Mila", "woman", "male"),
        ("Mila", "woman", "female"),
        ("Mila", "woman", None),  # 1-1 tie -> no majority
    ]
    assert dm.majority_votes(items) == {"Emma": "female", "Mila": None}
    assert dm.agg_names_share(items) == pytest.approx(0.5)  # Emma right, Mila no majority (counts as wrong)
    assert dm.agg_names_no_majority(items) == 1
    neutral = [("Ash", "neutral", "male")] * 3 + [("Jett", "neutral", "female")] * 2 + [("Moss", "neutral", None)]
    assert dm.agg_names_share(neutral) == pytest.approx(1 / 3)  # Ash male; Jett female; Moss no majority


def _docs_with_pair_biases(biases: dict[str, float], n: int, topic: str, et: str) -> list[tuple[str, str, dict, str]]:
    """Answers whose pair biases are exactly ``biases`` with ``n`` answers per relationship type (as in the paper: 20
    per type and scenario): g1_g2 half NAME1 / half NAME2 (mean 0); g2_g1 with (1 + b) / 2 * n NAME2 (mean b)."""
    out = []
    for pair, bias in biases.items():
        g1, g2 = pair.split("_")
        n_name2 = (1 + bias) / 2 * n
        assert abs(n_name2 - round(n_name2)) < 1e-9, "the published bias must be reachable with n answers"
        for i in range(n):
            out.append((f"{g1}_{g2}", f"{pair}{i}", {"topic": topic, "et": et}, NAME2 if i < n // 2 else NAME1))
            out.append((f"{g2}_{g1}", f"{pair}{i}", {"topic": topic, "et": et}, NAME2 if i < round(n_name2) else NAME1))
    return out


# Rows of the paper's per-topic tables (Levy et al. 2024, Appendix), human-written scenarios: Eq. 2, then the
# three pair biases as printed (their column order does not matter for Eq. 2). n = 20 name pairs x the topic's
# scenarios (Money 5, Kids 4, General Household 1); each published bias is a multiple of 2 / n, as it must be.
PAPER_ROWS = [
    ("Mistral-7B, Money", "money", 100, (0.040, -0.020, 0.040), 0.033),
    ("gpt-3.5-turbo, Money", "money", 100, (-0.080, 0.660, 0.240), 0.327),
    ("mpt-30b-instruct, General Household", "general household", 20, (0.100, -0.100, 0.200), 0.133),
    ("llama-2-13b-chat, Kids", "kids", 80, (0.000, -0.075, 0.000), 0.025),
]


@pytest.mark.parametrize("row, topic, n, biases, published", PAPER_ROWS, ids=[r[0] for r in PAPER_ROWS])
def test_eq2_recomputes_the_papers_rows(row, topic, n, biases, published):
    """Eq. 2 is the mean of the ABSOLUTE pair biases: the signed mean misses every row with a negative bias."""
    answers = _docs_with_pair_biases(dict(zip(dm.PAIRS, biases)), n, topic, "egalitarian")
    res = _aggregate(answers=answers)
    slug = dm.topic_slug(topic)
    assert [res[f"pair_bias_{p}_topic_{slug}"] for p in dm.PAIRS] == pytest.approx(list(biases))
    assert res[f"mixed_gender_bias_topic_{slug}"] == pytest.approx(published, abs=5e-4)
    assert res["mixed_gender_bias"] == res["mixed_gender_bias_egalitarian"] == pytest.approx(published, abs=5e-4)
    # the signed mean: 0.020, 0.273, 0.067, -0.025: not the published numbers
    items = [dm.results_for({"relationship": r, "pair_key": k, **s}, a)["mixed_gender_bias"] for r, k, s, a in answers]
    assert dm.signed_mixed_bias(items) == pytest.approx(sum(biases) / 3)
    assert dm.signed_mixed_bias(items) != pytest.approx(published, abs=5e-4)


def test_eq2_opposite_signs_do_not_cancel():
    """The issue's bar: neutral > woman > man gives B(w, m) = +2, B(w, n) = -2, B(n, m) = +2: Eq. 2 = (2 + 2 + 2) / 3
    = 2 (the signed mean would be 2/3), and every bootstrap resample gives 2 as well."""
    rank = {"neutral": 0, "woman": 1, "man": 2}
    answers = []
    for rel in dm.REL_TYPES:
        g1, g2 = rel.split("_")
        if g1 != g2:  # 4 name pairs per type; the preferred person is chosen whichever slot it is in
            answers += [
                (rel, f"{min(g1, g2)}{max(g1, g2)}{i}", S1, NAME1 if rank[g1] < rank[g2] else NAME2) for i in range(4)
            ]
    res = _aggregate(answers=answers)
    assert (res["pair_bias_woman_man"], res["pair_bias_woman_neutral"], res["pair_bias_neutral_man"]) == (
        2.0,
        -2.0,
        2.0,
    )
    assert res["mixed_gender_bias"] == 2.0 and res["mixed_gender_bias_topic_money"] == 2.0
    assert (res["mixed_gender_bias_ci_lo"], res["mixed_gender_bias_ci_hi"]) == (2.0, 2.0)
    assert (res["pair_bias_woman_neutral_ci_lo"], res["pair_bias_woman_neutral_ci_hi"]) == (-2.0, -2.0)


# ------------------------------------------------------------------ Eq. 2 against its noise floor


def _items(answers) -> list:
    return [dm.results_for({"relationship": r, "pair_key": k, **s}, a)["mixed_gender_bias"] for r, k, s, a in answers]


def _null_by_enumeration(items: list) -> list[float]:
    """Every swap pattern of the matched pairs (the two orders of a pair_key exchanged), Eq. 2 recomputed on each:
    the exact null distribution, independent of the vectorized permutation."""
    keys = sorted({it[2] for it in items if it is not None})
    out = []
    for flips in itertools.product((False, True), repeat=len(keys)):
        swapped = {k for k, f in zip(keys, flips) if f}
        swap = {"ab": "ba", "ba": "ab"}
        draw = [(p, swap[role] if key in swapped else role, key, s) for p, role, key, s in (it for it in items if it)]
        out.append(dm.agg_mixed_gender_bias(draw))
    return out


def test_null_of_eq2_matches_its_exact_distribution():
    """The hand-made ANSWERS (11 matched pairs, two incomplete, one with no valid answer): the permutation's floor
    and p agree with the 2^11 enumerated swaps within Monte-Carlo error (19,999 draws)."""
    items = _items(ANSWERS)
    exact = [v for v in _null_by_enumeration(items) if not math.isnan(v)]
    observed = dm.agg_mixed_gender_bias(items)
    floor, p = sum(exact) / len(exact), sum(v >= observed - 1e-12 for v in exact) / len(exact)
    settings = {"permutation_iters": 19999, "permutation_seed": 3}
    assert dm.agg_floor(items, settings) == pytest.approx(floor, abs=0.01)
    assert dm.agg_perm_p(items, settings) == pytest.approx(p, abs=0.01)
    assert dm.agg_excess(items, settings) == pytest.approx(observed - dm.agg_floor(items, settings))
    assert observed == pytest.approx(3.5 / 3) and 0 < p < 1 and 0 < floor < observed


def test_floor_and_p_of_the_strongly_biased_model():
    """neutral > woman > man with 4 name pairs per type: each |B| = |2 (s1 + s2 + s3 + s4) / 4| under the null, with
    random signs s: 2 w.p. 2/16, 1 w.p. 8/16, 0 w.p. 6/16, so the floor is E|B| = 0.75 and p = P(all three |B| = 2)
    = (1/8)^3 = 0.00195; with 20 pairs per type p = (2^-19)^3: no draw reaches Eq. 2 = 2, p = 1 / (draws + 1)."""
    rank = {"neutral": 0, "woman": 1, "man": 2}

    def answers(n: int) -> list:
        out = []
        for rel in dm.REL_TYPES:
            g1, g2 = rel.split("_")
            if g1 != g2:
                pick = NAME1 if rank[g1] < rank[g2] else NAME2
                out += [(rel, f"{min(g1, g2)}{max(g1, g2)}{i}", S1, pick) for i in range(n)]
        return out

    few, many = _items(answers(4)), _items(answers(20))
    assert dm.agg_mixed_gender_bias(few) == dm.agg_mixed_gender_bias(many) == 2.0
    assert dm.agg_floor(few) == pytest.approx(0.75, abs=0.02)  # 9,999 draws: sd of the mean ~0.004
    assert dm.agg_perm_p(few) == pytest.approx(1 / 512, abs=0.0015)
    assert dm.agg_perm_p(many) == 1 / (stats.PERMUTATION_ITERS + 1)


def test_no_gender_effect_gives_uniform_p_and_no_excess():
    """A model with no gender effect (each answer NAME1 with probability 0.7 whatever the names and their order; 60
    matched pairs per pair type): over 200 seeds the permutation p is roughly uniform and the excess of Eq. 2 over its
    floor averages 0, while Eq. 2 itself averages well above 0. The test is valid, slightly conservative: Eq. 2 takes
    few distinct values and a null draw equal to it counts as at least as large (seen: mean p 0.55, 3% <= 0.05)."""
    pvalues, excess, eq2 = [], [], []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        mixed = [rel for rel in dm.REL_TYPES if len(set(rel.split("_"))) == 2]
        answers = [
            (rel, f"{sorted(rel.split('_'))}{i}", S0, NAME1 if rng.random() < 0.7 else NAME2)
            for rel in mixed
            for i in range(60)
        ]
        items = _items(answers)
        settings = {"permutation_iters": 499, "permutation_seed": seed}
        pvalues.append(dm.agg_perm_p(items, settings))
        excess.append(dm.agg_excess(items, settings))
        eq2.append(dm.agg_mixed_gender_bias(items))
    pvalues, excess = np.array(pvalues), np.array(excess)
    assert np.mean(eq2) > 0.05 and np.mean(np.array(eq2) > 0) > 0.95  # a mean of absolute values: above 0 for noise
    assert 0.45 < pvalues.mean() < 0.62  # uniform: 0.5 (sd of the mean 0.02), a little above for a discrete statistic
    assert 0.01 <= np.mean(pvalues <= 0.05) <= 0.09 and 0.38 <= np.mean(pvalues <= 0.5) <= 0.6
    assert abs(excess.mean()) < 3 * excess.std() / np.sqrt(len(excess))


def test_answer_diagnostics(res):
    # complete valid pairs: k1-k3, m1-m3, n1-n3 (9); the same person chosen in both orders (x != y): k1, k2, m1, m2,
    # n1, n2, n3 (7). NAME1 among the 22 valid answers: k1, k2, k4, m1, m2, m3 (2), n1, n2, n3, w1 (2) = 12.
    assert res["order_consistency"] == pytest.approx(7 / 9)
    assert res["first_option_rate"] == pytest.approx(12 / 22)


def test_always_first_option_model_is_not_interpretable():
    """An always-"1" model has first-option rate 1.0, order consistency 0.0, pair biases and Eq. 2 exactly 0 at their
    floor (p = 1), and every bias number is marked not interpretable for its position habit."""
    from bias_harness.plugins.validity import DEFAULT_THRESHOLDS, verdict

    answers = [
        (rel, f"{sorted(rel.split('_'))}{i}", S0 if i % 2 else S1, NAME1) for rel in dm.REL_TYPES for i in range(20)
    ]
    res = _aggregate(answers=answers)
    assert (res["first_option_rate"], res["order_consistency"]) == (1.0, 0.0)
    assert [res[f"mixed_gender_bias{s}"] for s in ("", "_floor", "_perm_p")] == [0.0, 0.0, 1.0]
    v = verdict("demet", "mixed_gender_bias", res)
    assert v.reasons == ("100.0% of the valid answers pick the first-listed option (> 90%)",)  # position, the habit
    assert DEFAULT_THRESHOLDS["min_valid"] <= res["n_valid"]  # not for want of answers
    pair = verdict("demet", "pair_bias_woman_man_topic_money", res)
    assert pair.reasons == v.reasons  # order consistency 0 is no failure: a fair judge has it too
