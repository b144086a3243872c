"""The results page re-derives from the repository: response packs + run manifests -> the same numbers, no model.

* the ``replay`` model type renders chat prompts byte for byte as lm-eval's ``hf`` model does with the real tokenizer;
* the user's path on a real (tiny) model: ``bias-harness eval run`` -> ``replay record`` (manifest, sampled draws,
  token counts, and a replay that must agree) -> ``responses save`` -> on a "fresh machine" ``replay page`` gives
  the run's numbers; a request no pack holds is an error naming task, document and dialogue step;
* the committed page: ``numbers.json``'s checks (one task of every work) replay to the committed values, and a
  changed metric definition makes them differ (so CI fails until the page is regenerated).

The whole page: ``benchmarks/results_replay.py`` (minutes; CI runs the slow tests too, so it is no test).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bias_harness import responses
from bias_harness.errors import BadInput, MissingInput
from bias_harness.report import manifest as manifests
from bias_harness.report import replay

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "docs" / "results"
PY = sys.executable
BH = str(Path(sys.executable).with_name("bias-harness"))

CHATS = [
    [{"role": "user", "content": "Is Mila male or female?"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi <|im_end|> there"},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Again?"},
    ],
    [{"role": "user", "content": "Answer:"}, {"role": "assistant", "content": "The answer is"}],  # prefill
]


def _replay_lm(prompts: dict, tmp_path: Path):
    from bias_harness.plugins.replay import ReplayLM

    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"prompts": prompts}))
    return ReplayLM(manifest=str(path))


@pytest.mark.parametrize("template", ["chatml", "bos_and_no_system"])
def test_replay_renders_chat_prompts_like_hf(tiny_causal_lm: str, tmp_path: Path, template: str) -> None:
    """Every prompt string equals lm-eval's HFLM.apply_chat_template on the real tokenizer (the manifest is written
    from that tokenizer), including a template that uses a special token and one that rejects system messages."""
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_causal_lm)
    if template == "bos_and_no_system":
        tok.chat_template = (
            "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
            "{{ raise_exception('no system role') }}{% endif %}[{{ m['role'] }}] {{ m['content'] }}"
            "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
        )
    header = {"config": {"model": "hf", "model_args": {}}, "chat_template": tok.chat_template}
    block = manifests.prompts_block(None, header)
    block["special_tokens"] = dict(tok.special_tokens_map)
    lm = _replay_lm(block, tmp_path)
    hf = SimpleNamespace(tokenizer=tok, chat_template_args={})
    for chat in CHATS:
        for gen in (True, False):
            if not gen and chat[-1]["role"] != "assistant":
                continue
            assert lm.apply_chat_template(chat, gen) == HFLM.apply_chat_template(hf, chat, gen)
    assert lm.chat_template(True) == tok.chat_template and lm.chat_template(False) is None


def test_replay_renders_like_vllm(tiny_causal_lm: str, tmp_path: Path) -> None:
    """lm-eval's vLLM model passes ``chat_template`` and ``enable_thinking=None`` (0.4.13): the manifest keeps both."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_causal_lm)
    tok.chat_template = "{% if enable_thinking is defined %}T{% endif %}" + tok.chat_template
    header = {"config": {"model": "vllm", "model_args": {}}, "chat_template": tok.chat_template}
    block = manifests.prompts_block(None, header)
    assert block["template_kwargs"] == {"enable_thinking": None}
    block["special_tokens"] = dict(tok.special_tokens_map)
    lm = _replay_lm(block, tmp_path)
    for chat in CHATS[:2]:
        real = tok.apply_chat_template(
            chat,
            tokenize=False,
            add_generation_prompt=True,
            continue_final_message=False,
            chat_template=tok.chat_template,
            enable_thinking=None,
        )
        assert real.startswith("T") and lm.apply_chat_template(chat, True) == real


def test_committed_smollm2_manifests_render_like_the_model(tmp_path: Path) -> None:
    """The committed SmolLM2 manifests against the packaged model's own tokenizer (where it is prepared)."""
    from bias_harness import settings

    folder = settings.models_dir() / "smollm2"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("SmolLM2 not prepared (bias-harness models prepare smollm2)")
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    hf = SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(folder), chat_template_args={})
    chat_runs = [
        p for p in manifests.find(ROOT / "runs") if "--apply_chat_template" in manifests.read(p)["lm_eval_args"]
    ]
    assert chat_runs
    for path in chat_runs:
        lm = _replay_lm(manifests.read(path)["prompts"], tmp_path)
        for chat in CHATS[:2]:
            assert lm.apply_chat_template(chat, True) == HFLM.apply_chat_template(hf, chat, True), path


# ---------------------------------------------------------------- a real run, recorded and replayed


def _run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{cmd[:4]}...\n{done.stderr[-3000:]}"
    return done.stdout


def _eval(tiny: str, cwd: Path, out: str, flags: list[str]) -> Path:
    """``bias-harness eval run`` (lm-eval's CLI, in this process) on the tiny model, as results.sh runs it."""
    from bias_harness.cli import main

    before = set(cwd.rglob("results_*.json"))
    assert (
        main(
            [
                "eval",
                "run",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tiny},dtype=float32",
                "--device",
                "cpu",
                "--batch_size",
                "4",
                "--output_path",
                str(cwd / out),
                "--log_samples",
                "--use_cache",
                str(cwd / "cache" / "tiny-hf"),
                *flags,
            ]
        )
        == 0
    )
    (new,) = set(cwd.rglob("results_*.json")) - before
    return new


@pytest.fixture(scope="module")
def recorded(tiny_causal_lm: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two runs of the tiny model made and recorded as scripts/results.sh does: chat-templated generation (greedy,
    sampled single-turn, multi-turn; recorded with the command line) and log-likelihood without a chat template
    (StereoSet, whose inter part counts tokens)."""
    cwd = tmp_path_factory.mktemp("recorded")
    root = cwd / "page"
    flags = {
        "chat": [
            "--tasks",
            "demet_names,multiagent_test_nointeraction,stop",
            "--limit",
            "3",
            "--seed",
            "0",
            "--apply_chat_template",
        ],
        "ll": ["--tasks", "stereoset_en_combined", "--limit", "4", "--seed", "0"],
    }
    with replay.task_index_once():
        results = {group: _eval(tiny_causal_lm, cwd, f"out/{group}", f) for group, f in flags.items()}
        ll = replay.record(results["ll"], "tiny", "ll", cwd / "cache", flags["ll"], tiny_causal_lm, root / "runs")
    out = _run(
        [
            PY,
            "-m",
            "bias_harness.report.replay",
            "record",
            str(results["chat"]),
            "--model-key",
            "tiny",
            "--group",
            "chat",
            "--cache",
            "cache",
            "--tokenizer",
            tiny_causal_lm,
            "--runs",
            str(root / "runs"),
            "--",
            *flags["chat"],
        ],
        cwd,
    )
    responses.save(cwd / "cache", root / "responses")
    runs = {"chat": (Path(out.strip().splitlines()[-1]), results["chat"]), "ll": (ll, results["ll"])}
    return {"cwd": cwd, "root": root, "runs": runs}


def test_record_writes_manifests_draws_and_token_counts(recorded: dict, tiny_causal_lm: str) -> None:
    chat_manifest, results = recorded["runs"]["chat"]
    folder = "runs/tiny/chat/demet_names+multiagent_test_nointeraction+stop-hf"
    assert chat_manifest == recorded["root"] / folder / "manifest.json"
    m = manifests.read(chat_manifest)
    assert m["lm_eval_args"] == [
        "--tasks",
        "demet_names,multiagent_test_nointeraction,stop",
        "--limit",
        "3",
        "--seed",
        "0",
        "--apply_chat_template",
    ]
    assert m["pack"] == "tiny-hf_rank0" and m["run"]["model"] == "hf" and m["run"]["dtype"] == "torch.float32"
    assert m["run"]["versions"]["lm_eval"] == "0.4.13" and m["run"]["backend"].startswith("hf (transformers")
    assert m["prompts"]["chat_template"] and m["prompts"]["special_tokens"]["eos_token"] == "<|im_end|>"
    assert m["token_counts"] is None  # no metric of these tasks counts tokens
    assert (chat_manifest.parent / results.name).is_file() and m["results_file"] == results.name
    ll = manifests.read(recorded["runs"]["ll"][0])
    table = (recorded["runs"]["ll"][0].parent / ll["token_counts"]).resolve()
    assert table == recorded["root"] / "runs/tiny/token_counts.jsonl.xz" and table.is_file()
    # the draws of the sampled no-interaction task are in the packs, one per logged sample
    from bias_harness.plugins.replay import draw_key

    keys = {k for k, _ in responses.read_packs(recorded["root"] / "responses" / "tiny-hf_rank0")}
    logged = next(results.parent.glob("samples_multiagent_test_nointeraction_*.jsonl"))
    samples = [json.loads(line) for line in logged.open()]
    assert len(samples) == 3
    for s in samples:
        args = (s["arguments"]["gen_args_0"]["arg_0"], s["arguments"]["gen_args_0"]["arg_1"])
        assert args[1]["do_sample"] and draw_key(args, "multiagent_test_nointeraction", s["doc_id"], 0) in keys


def test_page_from_packs_gives_the_run_numbers(recorded: dict, tmp_path: Path) -> None:
    """A fresh machine: only the packs and manifests (copied), no model: the page's numbers are the runs' numbers."""
    root = tmp_path / "docs"
    shutil.copytree(recorded["root"], root)
    readme = replay.page(root, summary=None, tail="## Tail\n\nend")
    numbers = json.loads((root / "numbers.json").read_text())
    for manifest_path, results in recorded["runs"].values():
        key = str(manifest_path.relative_to(recorded["root"]))
        original = replay.run_numbers(results)
        got = numbers["runs"][key]["tasks"]
        for task, metrics in original.items():
            assert {k: got[task][k] for k in metrics} == pytest.approx(metrics, nan_ok=True), task
        assert f"`{key}`" in readme.read_text()  # the run table names the manifest
    text = readme.read_text()
    assert "hf (transformers" in text and "replay" not in text.split("## ")[0].lower()
    assert text.rstrip().endswith("end")
    assert {(c["work"], c["task"], c["limit"]) for c in numbers["checks"]} == {
        ("demet", "demet_names", None),
        ("multiagent", "multiagent_test_nointeraction", None),
        ("stereoset", "stereoset_en_combined", None),
        ("stop", "stop", None),
    }


def test_a_request_no_pack_holds_is_an_error(recorded: dict, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    responses.restore(recorded["root"] / "responses", cache)
    chat = recorded["runs"]["chat"][0]
    with replay.task_index_once():
        _missing_errors(chat, recorded["runs"]["ll"][0], cache, tmp_path)


def _missing_errors(chat: Path, ll: Path, cache: Path, tmp_path: Path) -> None:
    from bias_harness.plugins.replay import MissingResponse

    for task, where in [
        ("demet_names", "task 'demet_names', document 3 (generate_until)"),
        ("stop", "task 'stop', document 3, dialogue step 1 (generate_until)"),
        ("multiagent_test_nointeraction", "task 'multiagent_test_nointeraction', document 3 (gen"),
    ]:
        with pytest.raises(MissingResponse, match="no saved response for " + re.escape(where)):
            replay.replay_run(chat, cache, tmp_path / "out", tasks=task, limit=4)
    with pytest.raises(MissingResponse, match=r"'stereoset_en_combined', document 4 \(loglikelihood\) \(and 2 more"):
        replay.replay_run(ll, cache, tmp_path / "out", limit=5)


# ---------------------------------------------------------------- the committed page


def test_committed_runs_have_packs_manifests_and_numbers() -> None:
    """Every run on the page has a manifest and a pack; every manifest is on the page and in numbers.json."""
    numbers = json.loads((ROOT / replay.NUMBERS).read_text())
    readme = (ROOT / "README.md").read_text()
    found = manifests.find(ROOT / "runs")
    assert found and sorted(numbers["runs"]) == sorted(str(p.relative_to(ROOT)) for p in found)
    for path in found:
        m = manifests.read(path)
        assert any((ROOT / "responses" / m["pack"]).glob("*.jsonl.xz")), path
        assert f"`{path.relative_to(ROOT)}`" in readme
        if m.get("token_counts"):
            assert (path.parent / m["token_counts"]).is_file()
    assert not (ROOT / "addendum").exists()


def test_committed_page_checks_replay_to_its_numbers() -> None:
    """CI: one task of every work replays from the committed packs to exactly numbers.json's values; a check of a
    whole task also equals the page's numbers for that run."""
    numbers = json.loads((ROOT / replay.NUMBERS).read_text())
    works = {c["work"] for c in numbers["checks"]}
    on_page = {replay.work_of(t) for run in numbers["runs"].values() for t in run["tasks"]} - {None}
    assert works == on_page
    for c in numbers["checks"]:
        if c["limit"] is None:
            page = numbers["runs"][c["manifest"]]["tasks"][c["task"]]
            assert replay.differences(page, c["results"]) == []
    assert replay.check(ROOT) == []


def test_a_changed_metric_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric definition changed without regenerating the page: the check reports the metric that moved."""
    from bias_harness.plugins.demet import metrics

    numbers = json.loads((ROOT / replay.NUMBERS).read_text())
    (check,) = [c for c in numbers["checks"] if c["task"] == "demet_names"]
    original = metrics.agg_names_share  # the shares of the three name lists (their CIs are computed apart)
    monkeypatch.setattr(metrics, "agg_names_share", lambda items: original(items) / 2)
    diffs = replay.check(ROOT, only={"demet_names"})
    assert sorted(d.split(": committed")[0] for d in diffs) == [
        f"demet_names ({check['manifest']}, limit None): {m},choice"
        for m in ("acc_man", "acc_woman", "male_share_neutral")
    ]


# ---------------------------------------------------------------- manifests


def test_manifest_errors_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    with pytest.raises(MissingInput, match="no run manifest"):
        manifests.read(path)
    path.write_text("[1]")
    with pytest.raises(BadInput, match="a manifest is a JSON object"):
        manifests.read(path)
    good = json.loads(manifests.find(ROOT / "runs")[0].read_text())
    for field, value, message in [
        ("pack", None, "field 'pack' missing"),
        ("lm_eval_args", ["--limit", "3"], "with --tasks"),
        ("lm_eval_args", ["--tasks", "x", "--model", "hf"], "model-run flags"),
        ("manifest_version", 9, "this bias-harness reads 1"),
    ]:
        bad = dict(good)
        if value is None:
            del bad[field]
        else:
            bad[field] = value
        path.write_text(json.dumps(bad))
        with pytest.raises(BadInput, match=rf"{path}: field .*{message}|{path}: {message}"):
            manifests.read(path)


def test_redact_and_flags() -> None:
    data = {
        "model_args": {"pretrained": "m", "api_key": "abc123456", "token": ""},
        "cmd": "base_url=http://x,api_key=zzz,model=m",
        "note": "hf_abcdefghijklmnopqrstuvwxyz12",
        "env": "secret-value-123 in text",
    }
    out = manifests.redact(data, secrets=("secret-value-123",))
    assert out == {
        "model_args": {"pretrained": "m", "api_key": "***", "token": ""},
        "cmd": "base_url=http://x,api_key=***,model=m",
        "note": "***",
        "env": "*** in text",
    }
    args = ["-t", "stop", "--limit", "3", "--log_samples", "--apply_chat_template", "-o", "x", "--seed", "0"]
    long = manifests.long_flags(args)
    assert manifests.without(long, *manifests.MODEL_FLAGS) == [
        "--tasks",
        "stop",
        "--limit",
        "3",
        "--apply_chat_template",
        "--seed",
        "0",
    ]
    assert manifests.flag(long, "--tasks") == "stop" and manifests.flag(["--limit=5"], "--limit") == "5"


def test_numbers_compare_up_to_float_noise() -> None:
    """A metric that moves is a difference; the last bits of a float (summation order on another CPU) are not."""
    committed = {"stop": {"P,none": 0.3, "n_scored,none": 421.0, "nan,none": float("nan")}}
    assert (
        replay.differences(committed, {"stop": {"P,none": 0.1 + 0.2, "n_scored,none": 421.0, "nan,none": float("nan")}})
        == []
    )
    moved = {"stop": {"P,none": 0.300001, "n_scored,none": 421.0}}
    assert replay.differences(committed, moved) == [
        "stop: P,none: committed 0.3, replay 0.300001",
        "stop: nan,none: committed nan, replay '<absent>'",
    ]


def test_a_recorded_mitigation_run_replays_on_the_page(recorded: dict, tiny_causal_lm: str, tmp_path: Path) -> None:
    """``bias-harness mitigate ... --record-to ROOT`` (demet_clp on the tiny model, with a side effect): the page's
    Mitigation section replays both evaluations from the packs to the run's own numbers."""
    from bias_harness.mitigation import pipeline
    from bias_harness.mitigation import side_effects as se

    root = tmp_path / "docs"
    shutil.copytree(recorded["root"], root)
    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="demet_clp",
            model=tiny_causal_lm,
            output=out,
            limit=8,
            max_train_rows=4,
            overrides={"max_steps": 2, "trainable_top_layers": 1, "anchor_batch_size": 4, "save_steps": 1},
            side_effects=[se.SideEffect(task="stereoset_en", limit=4, why="StereoSet (en), 4 contexts")],
            record_to=root,
            model_key="tiny",
        )
    )
    assert result.recorded is not None and result.recorded.is_file()
    readme = replay.page(root, summary=None).read_text(encoding="utf-8")
    section = readme.split("## Mitigation", 1)[1]
    assert "`demet_clp` on tiny" in section and "Held-out evaluation" in section and "stereoset_en" in section
    numbers = json.loads((root / "numbers.json").read_text())
    (record,) = numbers["mitigation"].values()
    for stage in ("before", "after"):
        own = json.loads((out / "eval" / f"{stage}.json").read_text())["results"]["demet_mc"]
        got = record["main"][stage]["demet_mc"]
        keys = [k for k, v in own.items() if isinstance(v, float) and k in got]
        assert keys and {k: got[k] for k in keys} == pytest.approx({k: own[k] for k in keys}, nan_ok=True)
    assert numbers["mitigation_checks"]  # replayed by check() in test_committed_page_checks_replay_to_its_numbers
