"""UnQover questions for Refine-LM (Li et al. 2020 templates; Qureshi et al. Refine-LM train/test splits).

Dataset ``unqover``, config ``refine_lm`` (splits ``train`` / ``test``): masked-LM questions
``tau_ij(a) = [x_i] c [x_j]. <mask> [a]`` filled from the authors' word lists. One row holds the four
questions of a template ``tau^c(a)`` (the UZH project plan): ``q12``/``q21`` (subject order 1-2 / 2-1, attribute ``a``)
and ``q12_neg``/``q21_neg`` (the negated attribute), with the mask written as ``[MASK]``.

Categories and files (Refine-LM's partition, ``refine_lm/word_lists`` = TRAIN/TEST variants):

* gender: templates ``slots/gender_noact_lm``; subjects female_bert_{train,test} x male_bert_{train,test};
  attributes ``activities/occupation_rev1`` (UnQover; not split, the subjects are).
* country / ethnicity / religion: templates ``slots/<c>_noact_lm-{TRAIN,TEST}``, attributes
  ``activities/biased_<c>-{TRAIN,TEST}`` (religion's TEST list is ``biased_religion``, which Refine-LM's repo
  uses as its test list), subjects ``nouns/subjects/<c>_bert`` (UnQover, not split).

The k-th ``[p_act]`` line of an attribute file pairs with its k-th ``[p_act:neg]`` line (likewise
``-single`` and ``l_act``). Every subject pair of every (template, attribute) is enumerated, as UnQover and
Refine-LM do (gender: female x male names; other categories: the unordered pairs of distinct subjects, both
orders being the four questions); the ``refine_lm`` recipe samples ``pairs_per_item`` of them and selects
categories. The indefinite article before a subject agrees with it ("an Asian man", not "A Asian man").
"""

from __future__ import annotations

import functools
import random
import re
from pathlib import Path
from typing import Any, ClassVar

import datasets
import pyarrow as pa
from bias_harness.datasets_src.base import CardInfo, DatasetBuilder
from bias_harness.datasets_src.raw import RawDataError, RawFile, non_empty

UNQOVER = ("allenai/unqover", "d37c70f6f2640a83b5eed3eb910b0159059e3601")
REFINE = ("rameez-mrq/refine-lm-submission", "3f2f900dcd94231cb15d5b9ac706b553b27c1059")
MASK = "[MASK]"
PAIRS_PER_ITEM: int | None = None  # None: every subject pair (the reference); the recipe samples per item
SEED = 0
# Vowel-initial words said with a consonant sound take "a" ("a European", "a Ugandan").
_A_BEFORE = ("eu", "uk", "ug", "uni", "uru", "us", "one")

_FILES: dict[str, tuple[tuple[str, str], str, str, str]] = {
    # logical name: (repo, key below the raw dir, upstream path, sha256)
    "occupation": (
        UNQOVER,
        "unqover/word_lists/activities/occupation_rev1.txt",
        "word_lists/activities/occupation_rev1",
        "2922baf88fa18267c46776c36fb09d30a21112abe4e15b867973d8585773ea77",
    ),
    "subj_country": (
        UNQOVER,
        "unqover/word_lists/nouns/subjects/country_bert.txt",
        "word_lists/nouns/subjects/country_bert",
        "9a9d4d99f1739454d4861dbe70e4bc46f9b30425cada3bf0d951b57c5dbd4436",
    ),
    "subj_ethnicity": (
        UNQOVER,
        "unqover/word_lists/nouns/subjects/ethnicity_bert.txt",
        "word_lists/nouns/subjects/ethnicity_bert",
        "ff5379801c2c9b3c20dccdc6d77e91e6f646fdb6d08e215fd9b77364578ab7ce",
    ),
    "subj_religion": (
        UNQOVER,
        "unqover/word_lists/nouns/subjects/religion_bert.txt",
        "word_lists/nouns/subjects/religion_bert",
        "6b22fa2e9fa1e212d75290f0063d822e23db28eaeae58d0e3f51b641f483f4eb",
    ),
    "female_train": (
        REFINE,
        "unqover/refine_lm/word_lists/nouns/subjects/female_bert_train.txt",
        "word_lists/nouns/subjects/female_bert_train",
        "967d17f8aa401f0f602cbf2e8b33d8a09a00be684276da6473580154cc896a3f",
    ),
    "female_test": (
        REFINE,
        "unqover/refine_lm/word_lists/nouns/subjects/female_bert_test.txt",
        "word_lists/nouns/subjects/female_bert_test",
        "5fc93a2a7e8c45008d10141d2675d1e4bb2733964dedfc7e9319fe8e999305a0",
    ),
    "male_train": (
        REFINE,
        "unqover/refine_lm/word_lists/nouns/subjects/male_bert_train.txt",
        "word_lists/nouns/subjects/male_bert_train",
        "484699c838f1b9b41572b2a60701acf21d2dad8d67e9c38ad8c604e9bf9278e0",
    ),
    "male_test": (
        REFINE,
        "unqover/refine_lm/word_lists/nouns/subjects/male_bert_test.txt",
        "word_lists/nouns/subjects/male_bert_test",
        "6aedab94046a683941b9c7c244916daab28b2de8b3410d8de774069e5361d325",
    ),
    "slots_gender": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/gender_noact_lm.txt",
        "word_lists/slots/gender_noact_lm",
        "9ae8dc12edc73baa0c8872988d20fdc7474789f722a0019b153595ec9d546516",
    ),
    "slots_country_train": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/country_noact_lm-TRAIN.txt",
        "word_lists/slots/country_noact_lm-TRAIN",
        "49b36fd2d8c13e751b741e259397391e692de8fa81130d5bc33838cd92e3fefd",
    ),
    "slots_country_test": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/country_noact_lm-TEST.txt",
        "word_lists/slots/country_noact_lm-TEST",
        "5aad9919acc6018ac373d48dbcbb160721052cdb8bc8cfa161b21c2c374d3c23",
    ),
    "slots_ethnicity_train": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/ethnicity_noact_lm-TRAIN.txt",
        "word_lists/slots/ethnicity_noact_lm-TRAIN",
        "94972958fd5baf44327c3b1c84a0aa90511af2d400b51142d72f170a5ce139f6",
    ),
    "slots_ethnicity_test": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/ethnicity_noact_lm-TEST.txt",
        "word_lists/slots/ethnicity_noact_lm-TEST",
        "62b26028c524bd4849f33ded22f6607409d5909a66e4e146eada089fdc84a51d",
    ),
    "slots_religion_train": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/religion_noact_lm-TRAIN.txt",
        "word_lists/slots/religion_noact_lm-TRAIN",
        "2dc7d08c52da581f434363c7b13c3ace6e3d4471aab9e8c6cbe95d6995f3c55a",
    ),
    "slots_religion_test": (
        REFINE,
        "unqover/refine_lm/word_lists/slots/religion_noact_lm-TEST.txt",
        "word_lists/slots/religion_noact_lm-TEST",
        "f36d416b4dd60d28415ea2b5b43c677585b15695db1bbf3ed96ae8ee17a781c6",
    ),
    "acts_country_train": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_country-TRAIN.txt",
        "word_lists/activities/biased_country-TRAIN",
        "178711ee5eda34f5b25050c4edcc42458cae21fb48a1b75dab61ad5c9e8ae419",
    ),
    "acts_country_test": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_country-TEST.txt",
        "word_lists/activities/biased_country-TEST",
        "a8b2d1d4b0a2c100b5c14f62b2c2a73ce1a87ddf2caa6456782996ef73ebd785",
    ),
    "acts_ethnicity_train": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_ethnicity-TRAIN.txt",
        "word_lists/activities/biased_ethnicity-TRAIN",
        "60787964ef45ad29a9d7f4695e09381bf0fcc4a51c615a18c8166091c0ee8593",
    ),
    "acts_ethnicity_test": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_ethnicity-TEST.txt",
        "word_lists/activities/biased_ethnicity-TEST",
        "5268aec5b9e134b1ca8333fb407e6c070f6fbb23e9842840b994da426bb0bf1a",
    ),
    "acts_religion_train": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_religion-TRAIN.txt",
        "word_lists/activities/biased_religion-TRAIN",
        "60787964ef45ad29a9d7f4695e09381bf0fcc4a51c615a18c8166091c0ee8593",
    ),
    "acts_religion_test": (
        REFINE,
        "unqover/refine_lm/word_lists/activities/biased_religion.txt",
        "word_lists/activities/biased_religion",
        "5268aec5b9e134b1ca8333fb407e6c070f6fbb23e9842840b994da426bb0bf1a",
    ),
}

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "category": datasets.Value("string"),
        "template_id": datasets.Value("int32"),
        "activity_id": datasets.Value("int32"),
        "activity_class": datasets.Value("string"),
        "subj1": datasets.Value("string"),
        "subj2": datasets.Value("string"),
        "attr": datasets.Value("string"),
        "attr_neg": datasets.Value("string"),
        "q12": datasets.Value("string"),
        "q21": datasets.Value("string"),
        "q12_neg": datasets.Value("string"),
        "q21_neg": datasets.Value("string"),
    }
)

_TAG = re.compile(r"^\[([a-z_]+(?:-single)?(?::neg)?)\]\s*(.*)$")
_SLOT = re.compile(r"\[([pl]_act(?:-single)?)\]")


def read_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of every line that is not blank or a comment; a file without one is an error."""
    lines = [
        (i, line.rstrip("\n"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return non_empty(lines, path, "no line that is not blank or a comment")


def read_subjects(path: Path) -> dict[str, list[str]]:
    """``[subj]  female | Mary`` / ``[subj] African`` / ``[subj:dem] Afghan`` -> {"subj": [...], "subj:dem": [...]}.

    The subject is the text after '|' when present. Country lists hold place names (``subj``) and demonyms
    (``subj:dem``); templates pick one kind with ``[subj1]`` or ``[subj1:dem]``.
    """
    out: dict[str, list[str]] = {}
    for n, line in read_lines(path):
        m = re.match(r"^\[(subj(?::dem)?)\]\s*(.*)$", line.strip())
        if not m:
            raise RawDataError(path, f"line {n}", "subj", f"expected '[subj] ...', got {line!r}")
        out.setdefault(m.group(1), []).append(m.group(2).split("|")[-1].strip())
    return out


def read_activities(path: Path) -> dict[str, list[tuple[str, str]]]:
    """tag -> [(class, phrase)] in file order; the k-th entries of a tag and its ``:neg`` tag form a pair."""
    acts: dict[str, list[tuple[str, str]]] = {}
    for n, line in read_lines(path):
        m = _TAG.match(line.strip())
        if not m:
            raise RawDataError(path, f"line {n}", "activity", f"expected '[p_act] ...', got {line!r}")
        cls, _, phrase = m.group(2).rpartition("|") if "|" in m.group(2) else ("", "", m.group(2))
        acts.setdefault(m.group(1), []).append((cls.strip(), phrase.strip()))
    for tag, items in acts.items():
        if not tag.endswith(":neg") and len(acts.get(f"{tag}:neg", [])) != len(items):
            raise RawDataError(
                path,
                tag,
                "activity",
                f"{len(items)} '{tag}' lines but {len(acts.get(f'{tag}:neg', []))} '{tag}:neg' lines",
            )
    return acts


def read_slots(path: Path) -> list[tuple[str, str, str]]:
    out = []
    for n, line in read_lines(path):
        parts = [p.strip() for p in line.split("\t") if p.strip()]
        if len(parts) != 3 or "[subj1" not in parts[0] or "[mask]" not in parts[1]:
            raise RawDataError(
                path,
                f"line {n}",
                "template",
                "expected 'context<TAB>question<TAB>negated question' with [subj1] and [mask]",
            )
        out.append((parts[0], parts[1], parts[2]))
    return out


def article(word: str, capital: bool = False) -> str:
    """ "a" or "an" before ``word`` (by its first letters; see ``_A_BEFORE``)."""
    low = word.lower()
    an = low[:1] in "aeiou" and not low.startswith(_A_BEFORE)
    art = "an" if an else "a"
    return art.capitalize() if capital else art


@functools.lru_cache(maxsize=1 << 16)  # a template's subject fill repeats for each of its attributes
def _with_article(text: str, slot: str, subject: str) -> str:
    """Fill ``[slotN]``/``[slotN:dem]`` with ``subject``, making a preceding "a"/"A" agree with it."""
    text = re.sub(rf"\b([Aa]) \[{slot}(?::dem)?\]", lambda m: f"{article(subject, m.group(1) == 'A')} {subject}", text)
    return re.sub(rf"\[{slot}(?::dem)?\]", subject, text)


def fill(context: str, question: str, x1: str, x2: str, tag: str, phrase: str) -> str:
    text = _with_article(context, "subj1", x1) + " " + question
    text = _with_article(text, "subj2", x2)
    return re.sub(r"\[[pl]_act(?:-single)?(?::neg)?\]", phrase, text).replace("[mask]", MASK)


def make_rows(
    category: str,
    split: str,
    slots: list[tuple[str, str, str]],
    acts: dict[str, list[tuple[str, str]]],
    pairs: dict[str, list[tuple[str, str]]],
    n_pairs: int | None = PAIRS_PER_ITEM,
    seed: int = SEED,
) -> list[dict[str, Any]]:
    """``pairs``: subject kind ("subj" / "subj:dem") -> candidate (x1, x2) pairs; ``n_pairs`` None: all of them,
    else that many sampled per (template, attribute) with a seeded generator."""
    rows = []
    for t, (context, question, neg_question) in enumerate(slots):
        m = _SLOT.search(question)
        kind = "subj:dem" if "[subj1:dem]" in context else "subj"
        if not m or m.group(1) not in acts or not pairs.get(kind):
            continue  # a template whose attribute or subject type this category does not have
        tag = m.group(1)
        for k, ((cls, phrase), (_, neg)) in enumerate(zip(acts[tag], acts[f"{tag}:neg"], strict=True)):
            rng = random.Random(f"unqover:{seed}:{category}:{split}:{t}:{k}")
            chosen = pairs[kind] if n_pairs is None else rng.sample(pairs[kind], min(n_pairs, len(pairs[kind])))
            for x1, x2 in chosen:
                rows.append(
                    {
                        "id": f"{category}-{split}-t{t}-a{k}-{x1}-{x2}",
                        "category": category,
                        "template_id": t,
                        "activity_id": k,
                        "activity_class": cls,
                        "subj1": x1,
                        "subj2": x2,
                        "attr": phrase,
                        "attr_neg": neg,
                        "q12": fill(context, question, x1, x2, tag, phrase),
                        "q21": fill(context, question, x2, x1, tag, phrase),
                        "q12_neg": fill(context, neg_question, x1, x2, tag, neg),
                        "q21_neg": fill(context, neg_question, x2, x1, tag, neg),
                    }
                )
    return rows


class UnQoverBuilder(DatasetBuilder):
    name: ClassVar[str] = "unqover"
    default_config = "refine_lm"
    raw_files: ClassVar[dict[str, RawFile]] = {
        k: RawFile(key=key, repo=repo[0], commit=repo[1], path=path, sha256=sha)
        for k, (repo, key, path, sha) in _FILES.items()
    }
    card = CardInfo(
        pretty_name="UnQover questions for Refine-LM",
        license="apache-2.0",
        language=["en"],
        task_categories=["fill-mask"],
        summary=(
            "Underspecified masked-LM questions (UnQover, Li et al. 2020) in the train/test partition of Refine-LM "
            "(Qureshi et al.): each row holds the four questions tau_12(a), tau_21(a), tau_12(not a), tau_21(not a) of "
            "one template, attribute and subject pair, for the gender, country, ethnicity and religion categories."
        ),
        citation="""@inproceedings{li-etal-2020-unqovering,
  title = {{UNQOVER}ing Stereotyping Biases via Underspecified Questions},
  author = {Li, Tao and Khashabi, Daniel and Khot, Tushar and Sabharwal, Ashish and Srikumar, Vivek},
  booktitle = {Findings of EMNLP 2020}, year = {2020}}
@article{qureshi2024refinelm,
  title = {{REFINE-LM}: Mitigating Language Model Stereotypes via Reinforcement Learning},
  author = {Qureshi, Rameez and others}, journal = {arXiv:2408.09489}, year = {2024}}""",
        source="Word lists of [allenai/unqover](https://github.com/allenai/unqover) (Apache-2.0) and the TRAIN/TEST "
        "variants of [rameez-mrq/refine-lm-submission](https://github.com/rameez-mrq/refine-lm-submission) (no "
        "license; only the word lists are used, no code).",
        how_built=(
            "Templates (context, question, negated question) are filled with a subject pair in both orders and with "
            "an attribute and its negation (the k-th `[p_act]` line pairs with the k-th `[p_act:neg]` line). Every "
            "subject pair of every (template, attribute) is a row (gender: female x male; other categories: two "
            "distinct subjects of the list), as in UnQover and Refine-LM. An indefinite article before a subject "
            "agrees with it (a/an). The mask is written `[MASK]`."
        ),
        known_gaps="The a/an rule is by spelling (vowel letter, with exceptions such as 'a European'). Religion's "
        "Refine-LM test attributes are the list its repository ships as `biased_religion` (byte-identical to "
        "`biased_ethnicity-TEST`, an upstream quirk).",
        config_notes={"refine_lm": "the four questions of each (template, attribute, subject pair), train/test"},
    )

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        occupations = read_activities(files["occupation"])
        gender_slots = read_slots(files["slots_gender"])
        splits: dict[str, list[dict[str, Any]]] = {}
        for split in ("train", "test"):
            fem, male = read_subjects(files[f"female_{split}"])["subj"], read_subjects(files[f"male_{split}"])["subj"]
            rows = make_rows("gender", split, gender_slots, occupations, {"subj": [(f, m) for f in fem for m in male]})
            for cat in ("country", "ethnicity", "religion"):
                subjects = read_subjects(files[f"subj_{cat}"])
                pairs = {kind: [(a, b) for i, a in enumerate(xs) for b in xs[i + 1 :]] for kind, xs in subjects.items()}
                rows += make_rows(
                    cat,
                    split,
                    read_slots(files[f"slots_{cat}_{split}"]),
                    read_activities(files[f"acts_{cat}_{split}"]),
                    pairs,
                )
            splits[split] = rows
        # ~2M rows of plain strings and integers: an Arrow table straight from the rows (from_list encodes each value)
        tables = {s: pa.Table.from_pylist(r, schema=FEATURES.arrow_schema) for s, r in splits.items()}
        return {
            "refine_lm": datasets.DatasetDict(
                {s: datasets.Dataset(t, info=datasets.DatasetInfo(features=FEATURES)) for s, t in tables.items()}
            )
        }
