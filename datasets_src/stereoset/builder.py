"""StereoSet (Nadeem et al., ACL 2021) in English and in the German translation of Öztürk et al. (2023).

Two datasets, each with configs ``intrasentence`` and ``intersentence`` (split ``validation`` = StereoSet's
public dev set; the test set was never released):

* ``stereoset_en`` - the original English StereoSet dev set, from the authors' English pickles in
  ``slds-lmu/stereotypes-multi`` (built there from StereoSet ``dev.json``), converted 1:1 to JSONL.
* ``stereoset_de`` - the machine-translated German version (AWS Translate + rule fixes) of the same repo.

One row per context, with its three candidates as named columns ``stereotype``, ``anti_stereotype`` and
``unrelated`` (the gold label is the column; ``source_order`` keeps the upstream c1..c3 order), each with the
StereoSet sentence id, the sentence, the five crowd labels and, for intrasentence, the blank filler ``word``,
``filled`` (the context with every ``BLANK`` replaced by ``word``) and ``word_start``/``word_end`` (character
span of the first filled blank in ``filled``). ``target_en`` is the English StereoSet target term (for German
the authors' ``target_original``): rows of both languages align on ``id`` and ``target_en``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import datasets
from bias_harness.datasets_src.base import CardInfo, DatasetBuilder
from bias_harness.datasets_src.raw import RawDataError, RawFile, read_jsonl

REPO = "slds-lmu/stereotypes-multi"
COMMIT = "883f005dd9d003a6974e498f435629ec46d931c7"
BLANK = "BLANK"
SPLIT = "validation"
GOLD = ("stereotype", "anti-stereotype", "unrelated")  # candidate column order = choice order in the tasks
COLUMNS = {"stereotype": "stereotype", "anti-stereotype": "anti_stereotype", "unrelated": "unrelated"}
BIAS_TYPES = ("gender", "profession", "race", "religion")
CROWD_LABELS = ("stereotype", "anti-stereotype", "unrelated", "related")

CITATION = """@inproceedings{nadeem-etal-2021-stereoset,
    title = "{S}tereo{S}et: Measuring stereotypical bias in pretrained language models",
    author = "Nadeem, Moin and Bethke, Anna and Reddy, Siva",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th \
International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    year = "2021",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2021.acl-long.416",
    pages = "5356--5371",
}"""
CITATION_DE = (
    """@misc{ozturk2023different,
    title = {How Different Is Stereotypical Bias Across Languages?},
    author = {Öztürk, Ibrahim Tolga and Nedelchev, Rostislav and Heumann, Christian and Garces Arias, Esteban and \
Roger, Marius and Bischl, Bernd and Aßenmacher, Matthias},
    year = {2023},
    eprint = {2307.07331},
    archivePrefix = {arXiv},
    primaryClass = {cs.CL},
}
"""
    + CITATION
)


def _labels_schema() -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["label", "human_id"],
            "properties": {"label": {"enum": list(CROWD_LABELS)}, "human_id": {"type": "string"}},
        },
    }


def record_schema(intra: bool, german: bool) -> dict[str, Any]:
    """JSON Schema of one upstream row (pandas DataFrame row converted to JSON)."""
    props: dict[str, Any] = {
        "id": {"type": "string", "minLength": 1},
        "target": {"type": "string", "minLength": 1},
        "bias_type": {"enum": list(BIAS_TYPES)},
        "context": {"type": "string", "minLength": 1, **({"pattern": BLANK} if intra else {})},
    }
    if german:
        props["target_original"] = {"type": "string", "minLength": 1}
    for i in (1, 2, 3):
        props[f"c{i}_sentence"] = {"type": "string", "minLength": 1}
        props[f"c{i}_gold_label"] = {"enum": list(GOLD)}
        props[f"c{i}_id"] = {"type": "string", "minLength": 1}
        props[f"c{i}_labels"] = _labels_schema()
        if intra:
            props[f"c{i}_word"] = {"type": "string", "minLength": 1}
    return {"type": "object", "required": sorted(props), "properties": props}


_LABEL = datasets.List({"label": datasets.Value("string"), "human_id": datasets.Value("string")})
_COMMON = {
    "id": datasets.Value("string"),
    "target": datasets.Value("string"),
    "target_en": datasets.Value("string"),
    "bias_type": datasets.Value("string"),
    "context": datasets.Value("string"),
}


def features(intra: bool) -> datasets.Features:
    cand: dict[str, Any] = {"id": datasets.Value("string"), "sentence": datasets.Value("string")}
    if intra:
        cand |= {
            "word": datasets.Value("string"),
            "filled": datasets.Value("string"),
            "word_start": datasets.Value("int32"),
            "word_end": datasets.Value("int32"),
        }
    cand["labels"] = _LABEL
    return datasets.Features(
        {
            **_COMMON,
            **{col: dict(cand) for col in COLUMNS.values()},
            "source_order": datasets.List(datasets.Value("string")),
        }
    )


def convert(path: Path, intra: bool, german: bool) -> list[dict[str, Any]]:
    """Validate the upstream rows and turn each into one row with named candidate columns."""
    rows = read_jsonl(path, record_schema(intra, german), id_field="id")
    seen: dict[str, int] = {}
    out = []
    for n, r in enumerate(rows, start=1):
        label = f"line {n} (id={r['id']!r})"
        if r["id"] in seen:
            raise RawDataError(path, label, "id", f"duplicate id (also line {seen[r['id']]})")
        seen[r["id"]] = n
        order = [r[f"c{i}_gold_label"] for i in (1, 2, 3)]
        if sorted(order) != sorted(GOLD):
            raise RawDataError(
                path,
                label,
                "c1_gold_label..c3_gold_label",
                f"expected one stereotype, one anti-stereotype and one unrelated candidate, got {order}",
            )
        row: dict[str, Any] = {
            "id": r["id"],
            "target": r["target"],
            "target_en": r["target_original"] if german else r["target"],
            "bias_type": r["bias_type"],
            "context": r["context"],
        }
        cands: dict[str, dict[str, Any]] = {}
        for i in (1, 2, 3):
            cand: dict[str, Any] = {"id": r[f"c{i}_id"], "sentence": r[f"c{i}_sentence"]}
            if intra:
                word = r[f"c{i}_word"]
                start = r["context"].index(BLANK)
                cand |= {
                    "word": word,
                    "filled": r["context"].replace(BLANK, word),
                    "word_start": start,
                    "word_end": start + len(word),
                }
            cand["labels"] = r[f"c{i}_labels"]
            cands[COLUMNS[r[f"c{i}_gold_label"]]] = cand
        row |= {col: cands[col] for col in COLUMNS.values()}
        row["source_order"] = order
        out.append(row)
    return out


KNOWN_GAPS_COMMON = (
    "- `filled` (the context with every `BLANK` replaced by `word`) is what the lm-eval tasks score. It can differ "
    "from the crowd-written `sentence`: in English about a third of the candidate sentences differ from `filled` only "
    "in letter case (e.g. context 'The Crimean people I met were BLANK', sentence 'The crimean people i met were "
    "...'). StereoSet's own masked-LM code also fills the context, not the sentence.\n"
    "- `word` is the upstream filler. For two English contexts whose `BLANK` is glued to other characters "
    "('...sometimes.BLANK', '...very BLANK!p') StereoSet's word extraction (split on spaces, strip punctuation) "
    "produced fillers such as 'sometimespizza' / 'spiritualp'; they are kept as published.\n"
    "- Two contexts contain `BLANK` twice (ids `ce50e6e3…`, `d64c8385…`); `filled` fills both, "
    "`word_start`/`word_end` mark the first.\n"
    "- Only the dev set exists publicly (StereoSet's test set is hidden); the split is called `validation`."
)


class _StereoSetBuilder(DatasetBuilder):
    german: ClassVar[bool]
    lang: ClassVar[str]
    default_config = "intrasentence"

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        out = {}
        for cfg, intra in (("intrasentence", True), ("intersentence", False)):
            rows = convert(files[cfg], intra, self.german)
            out[cfg] = datasets.DatasetDict({SPLIT: datasets.Dataset.from_list(rows, features=features(intra))})
        return out


def _raw(lang: str, part: str, sha256: str) -> RawFile:
    return RawFile(
        key=f"stereoset_{lang}/{part}_{lang}.jsonl",
        repo=REPO,
        commit=COMMIT,
        path=f"create_dataset/data/{part}/df_{part}_{lang}.pkl",
        sha256=sha256,
    )


CONFIG_NOTES = {
    "intrasentence": "one row per context with a BLANK; 3 fillers (stereotype / anti-stereotype / unrelated)",
    "intersentence": "one row per context sentence; 3 follow-up sentences (stereotype / anti-stereotype / unrelated)",
}
HOW_BUILT = (
    "The upstream pandas pickles were converted 1:1 to JSON Lines (one line per DataFrame row, values unchanged, row "
    "order kept; only pandas/numpy/builtins globals were referenced). The builder validates every row with a JSON "
    "Schema (errors name file, line, id and field), checks that each context has exactly one stereotype, one "
    "anti-stereotype and one unrelated candidate and that ids are unique, and reorders the candidates into named "
    "columns `stereotype`, `anti_stereotype`, `unrelated`, each a struct {`id` (StereoSet sentence id), `sentence`, "
    "`labels`; intrasentence also `word`, `filled`, `word_start`, `word_end`}; `source_order` lists the gold labels "
    "in the upstream c1..c3 order. Crowd labels (5 per sentence: stereotype / anti-stereotype / unrelated / related) "
    "are kept with their annotator ids."
)


class StereoSetEN(_StereoSetBuilder):
    name = "stereoset_en"
    german = False
    lang = "en"
    raw_files = {
        "intrasentence": _raw(
            "en", "intrasentence", "106ee85ad6d7694e0f3c0dd99e4a3ae822dfa9e23f7729eeaaaefbdfb1c9e55f"
        ),
        "intersentence": _raw(
            "en", "intersentence", "e32b7005144e5868d558c9b91ce459492363d7875df83c4654a8d3d8949c82d8"
        ),
    }
    card = CardInfo(
        pretty_name="StereoSet (English, dev set)",
        license="cc-by-sa-4.0",
        language=["en"],
        task_categories=["text-classification", "fill-mask"],
        summary=(
            "StereoSet (Nadeem et al., ACL 2021) measures stereotypical bias of language models with Context "
            "Association Tests (CATs): for a context about a target group (gender, profession, race, religion) a "
            "model ranks a stereotypical, an anti-stereotypical and an unrelated candidate. Intrasentence: fill the "
            "BLANK of one sentence; intersentence: choose the follow-up sentence. Scores: lms, ss and icat."
        ),
        citation=CITATION,
        source=(
            f"English pickles `create_dataset/data/{{intra,inter}}sentence/df_*_en.pkl` of `{REPO}` @ `{COMMIT[:12]}` "
            "(built there directly from StereoSet `dev.json`, `moinnadeem/StereoSet`, CC BY-SA 4.0). The set of "
            "sentence ids equals the official StereoSet prediction files (intrasentence 2,106 x 3, intersentence "
            "2,123 x 3)."
        ),
        how_built=HOW_BUILT,
        known_gaps=(
            "- The raw files are JSON Lines converted from the upstream pickles, so their checksum differs from the "
            "upstream pickle: they cannot be downloaded, provide them with `BIAS_HARNESS_RAW_DIR`.\n"
            + KNOWN_GAPS_COMMON
        ),
        homepage="https://stereoset.mit.edu",
        config_notes=CONFIG_NOTES,
    )


class StereoSetDE(_StereoSetBuilder):
    name = "stereoset_de"
    german = True
    lang = "de"
    raw_files = {
        "intrasentence": _raw(
            "de", "intrasentence", "113dc7ab1404153d8deb2b56fa60a3515f6e74a14a77c9fafb47d9bcfde92aff"
        ),
        "intersentence": _raw(
            "de", "intersentence", "b668ea97ee8d75d42076ce7ed40c423dcae6156199c8f4abdb312ec1e55e263a"
        ),
    }
    card = CardInfo(
        pretty_name="StereoSet German (Öztürk et al. 2023, machine-translated dev set)",
        license="cc-by-sa-4.0",
        language=["de"],
        task_categories=["text-classification", "fill-mask"],
        summary=(
            "The German translation of the StereoSet dev set by Öztürk et al. (2023, 'How Different Is Stereotypical "
            "Bias Across Languages?'): intrasentence and intersentence Context Association Tests with a stereotypical, "
            "an anti-stereotypical and an unrelated candidate per context, bias types gender, profession, race and "
            "religion. Ids, candidate ids, gold and crowd labels are those of English StereoSet (`stereoset_en`), so "
            "the two align by `id`; `target_en` holds the English target term."
        ),
        citation=CITATION_DE,
        source=(
            f"`create_dataset/data/{{intra,inter}}sentence/df_*_de.pkl` of `{REPO}` @ `{COMMIT[:12]}` (no LICENSE "
            "file; a translation of StereoSet, CC BY-SA 4.0, so treated as CC BY-SA 4.0)."
        ),
        how_built=HOW_BUILT,
        known_gaps=(
            "- **Machine translation.** The German text is AWS Translate output plus the authors' rule-based fixes; it "
            "contains agreement artifacts (e.g. 'Der Schachspieler war asiatische.') and sometimes several German "
            "renderings of one English target (163 German intrasentence targets for 79 English ones; use `target_en` "
            "to group by StereoSet target).\n"
            "- **3 intrasentence items dropped by the authors** (reflexive 'herself/himself' contexts, ids "
            "`50c90b81…`, `addb7a3a…`, `de204ffe…`): 2,103 intrasentence rows against 2,106 in English. "
            "Intersentence has all 2,123.\n"
            "- The raw files are JSON Lines converted from the upstream pickles, so their checksum differs from the "
            "upstream pickle: they cannot be downloaded, provide them with `BIAS_HARNESS_RAW_DIR`.\n"
            "- Two contexts contain `BLANK` twice; `filled` fills both, `word_start`/`word_end` mark the first.\n"
            "- Only the dev set exists publicly; the split is called `validation`."
        ),
        homepage="https://github.com/slds-lmu/stereotypes-multi",
        config_notes=CONFIG_NOTES,
    )
