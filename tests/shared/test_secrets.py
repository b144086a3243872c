"""No token or key in anything bias-harness writes or prints: results, reports, cards, upload folders, configs, logs.

Sentinel secrets go in both ways a user passes them: on the command line (``token=`` in ``--model_args``, an
``api_key`` in ``--metadata``, ``--set hub_token=``) and in the environment (``HF_TOKEN``, ``OPENAI_API_KEY``).
Every file under the folders a run, a report and a mitigation dry run write is searched byte by byte, and so is
everything the processes printed. The rules themselves (``bias_harness.redact``) are checked first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bias_harness.redact import MASK, is_secret_name, redact, redact_argv, redact_text, secrets_in_argv
from tests.helpers import SECRETS_ARGV, SECRETS_ENV, run_cli

SENTINELS = [*SECRETS_ARGV.values(), *SECRETS_ENV.values()]


@pytest.mark.parametrize(
    "name,secret",
    [
        ("token", True),
        ("hub_token", True),
        ("HF_TOKEN", True),
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("client_secret", True),
        ("db_password", True),
        ("use_auth_token", True),
        ("pad_token", False),
        ("tokenizer_eos_token", False),
        ("eot_token_id", False),
        ("max_new_tokens", False),
        ("max_tokens", False),
        ("api_key_env", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("tokenizer", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_redaction_rules() -> None:
    assert (
        redact_text("hf ({'pretrained': '/m', 'token': 'abc123xyz'}), gen_kwargs: ({})", [])
        == "hf ({'pretrained': '/m', 'token': '***'}), gen_kwargs: ({})"
    )
    assert redact_text("pretrained=/m,token=abc123xyz,dtype=float32", []) == "pretrained=/m,token=***,dtype=float32"
    assert (
        redact_text('{"api_key": "k-1234567", "pad_token": "<pad>", "token": null}', [])
        == '{"api_key": "***", "pad_token": "<pad>", "token": null}'
    )
    # a key named after data is no secret: the results page's model_key, DeMET's pair_key
    assert redact({"model_key": "smollm2", "pair_key": "0:woman-man:1", "access_key": "abc"}, []) == {
        "model_key": "smollm2",
        "pair_key": "0:woman-man:1",
        "access_key": MASK,
    }
    # tokens by their look, wherever they are; not inside other words
    text = "use hf_abcdefghijklmnopqrst or sk-proj-abcdefghijklmnop12; desk-abcdefghijklmnopqrstuv"
    assert redact_text(text, []) == "use *** or ***; desk-abcdefghijklmnopqrstuv"
    # a remembered value, whatever surrounds it
    assert (
        redact_text("failed for user with password-less key QWERTY123 (QWERTY123)", ["QWERTY123"])
        == "failed for user with password-less key *** (***)"
    )
    data = {
        "model_args": {"pretrained": "/m", "token": "abc"},
        "metadata": {"api_key": "k", "use_auth_token": True},
        "runs": [("a", "x --hub_token=zzz")],
        "n": 3,
    }
    assert redact(data, []) == {
        "model_args": {"pretrained": "/m", "token": MASK},
        "runs": [("a", "x --hub_token=***")],
        "metadata": {"api_key": MASK, "use_auth_token": True},
        "n": 3,
    }
    argv = [
        "mitigate",
        "x",
        "--set",
        "hub_token=s3cr3t",
        "--hub-token",
        "s3cr3t2",
        "--token=s3cr3t3",
        "--metadata",
        '{"api_key": "s3cr3t4"}',
    ]
    assert secrets_in_argv(argv) == {"s3cr3t", "s3cr3t2", "s3cr3t3", "s3cr3t4"}
    assert redact_argv(argv) == [
        "mitigate",
        "x",
        "--set",
        "hub_token=***",
        "--hub-token",
        "***",
        "--token=***",
        "--metadata",
        '{"api_key": "***"}',
    ]


def _leaks(*roots: Path, texts: tuple[str, ...] = ()) -> list[str]:
    """Every (file or printed text, sentinel) pair where a sentinel shows up."""
    found = [
        f"{path}: {s}"
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
        for s in SENTINELS
        if s.encode() in path.read_bytes()
    ]
    return found + [f"<printed {i}>: {s}" for i, text in enumerate(texts) for s in SENTINELS if s in text]


def test_eval_and_report_write_no_secret(sentinel_run, tmp_path: Path) -> None:
    run, proc = sentinel_run
    assert not _leaks(run, texts=(proc.stdout, proc.stderr))
    results = json.loads(next(run.rglob("results_*.json")).read_text(encoding="utf-8"))
    assert results["config"]["model_args"]["token"] == MASK  # masked where lm-eval records it, not dropped
    assert results["configs"]["demet_mc"]["metadata"]["api_key"] == MASK
    assert "'token': '***'" in proc.stdout  # lm-eval's summary line above its table

    # plain lm_eval (not `bias-harness eval`) writes --model_args as given: the report masks them
    plain = tmp_path / "plain"
    shutil.copytree(run, plain)
    path = next(plain.rglob("results_*.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["config"]["model_args"]["token"] = SECRETS_ARGV["model_args"]
    path.write_text(json.dumps(data), encoding="utf-8")
    rep = run_cli(["report", run, plain, "--out", tmp_path / "report"], tmp_path, **SECRETS_ENV)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert not _leaks(tmp_path / "report", texts=(rep.stdout, rep.stderr))
    assert "token=***" in (tmp_path / "report" / "README.md").read_text(encoding="utf-8")


def test_mitigation_dry_run_writes_no_secret(tiny_causal_lm: str, tmp_path: Path) -> None:
    """The upload folder (card, summary, training_args.bin), the output folder (recipe.yaml, evaluations,
    checkpoints) and the logs of `bias-harness mitigate ... --set hub_token=... --dry-run DIR`."""
    import torch

    out, upload = tmp_path / "out", tmp_path / "upload"
    small = ["max_steps=1", "save_steps=1", "per_device_train_batch_size=2", "max_length=64"]
    proc = run_cli(
        [
            "mitigate",
            "stop_align",
            "--model",
            tiny_causal_lm,
            "--output",
            out,
            "--eval-tasks",
            "demet_mc",
            "--limit",
            "2",
            "--max-train-rows",
            "4",
            *[a for kv in small for a in ("--set", kv)],
            "--set",
            f"hub_token={SECRETS_ARGV['set']}",
            "--metadata",
            json.dumps({"api_key": SECRETS_ARGV["metadata"]}),
            "--dry-run",
            upload,
        ],
        tmp_path,
        **SECRETS_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not _leaks(out, upload, texts=(proc.stdout, proc.stderr))
    for folder in (upload, out / "model", out / "checkpoints" / "checkpoint-1"):
        assert torch.load(folder / "training_args.bin", weights_only=False).hub_token == MASK
    card = (upload / "README.md").read_text(encoding="utf-8")
    assert "--set 'hub_token=***'" in card and '--metadata \'{"api_key": "***"}\'' in card
    summary = json.loads((upload / "bias_harness_mitigation.json").read_text(encoding="utf-8"))
    assert summary["after"]["settings"]["metadata"]["api_key"] == MASK


# ---------------------------------------------------------------- masking by shape (issue 39)


@pytest.mark.parametrize(
    "text,masked",
    [
        # URL userinfo: masked whole, wherever the URL is
        ("base_url=http://alice:pa55word@host:8000/v1/chat", "base_url=http://***@host:8000/v1/chat"),
        ("see https://hf_abcdefghijklmnopqrstuv@github.com/x", "see https://***@github.com/x"),
        ("mailto alice@example.com and git@github.com:o/r", "mailto alice@example.com and git@github.com:o/r"),
        # query-string tokens by name
        ("https://x.blob/c?sv=1&sig=abcDEF123%3D&se=2", "https://x.blob/c?sv=1&sig=***&se=2"),
        ("https://api.x/v1?api_key=abcdef123&q=1", "https://api.x/v1?api_key=***&q=1"),
        # key-shaped values: the whole value must have the shape
        ("/m/sk-slovak-gpt2-base-cased-v2/config.json", "/m/sk-slovak-gpt2-base-cased-v2/config.json"),
        ("hf_cache_for_models_abcdefghijklmnopq", "hf_cache_for_models_abcdefghijklmnopq"),
        ("/x/hf_abcdefghijklmnopqrst/y", "/x/***/y"),
        ("key sk-proj-abcdefghijklmnop12 end", "key *** end"),
        ("AKIAABCDEFGHIJKLMNOP ghp_abcdefghijklmnopqrstuvwxyz0123", "*** ***"),
        # a bare "key" names a dictionary key or a metavar, not a secret; api_key does
        ("--set KEY=VALUE", "--set KEY=VALUE"),
        ('{"key": "demet/x.csv", "api_key": "abc123"}', '{"key": "demet/x.csv", "api_key": "***"}'),
    ],
)
def test_masking_by_shape(text: str, masked: str) -> None:
    assert redact_text(text, []) == masked


def test_url_passwords_on_the_command_line_are_remembered() -> None:
    argv = ["--model_args", "base_url=http://alice:PASSWORD123@host/v1", "--gen_kwargs", "api_key=GENKW12345"]
    assert {"PASSWORD123", "GENKW12345"} <= secrets_in_argv(argv)


def test_mitigate_help_shows_the_metavar(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38: `--set KEY=VALUE` was printed `--set KEY=***` (a bare `key` counted as a secret name)."""
    from bias_harness.cli import main

    with pytest.raises(SystemExit):
        main(["mitigate", "--help"])
    out = capsys.readouterr().out
    assert "--set KEY=VALUE" in out and MASK not in out


# sentinels in every argument shape: URL userinfo (an API model's base_url, data generate's --base-url), a key in
# --gen_kwargs, a key in --metadata, and the environment
SHAPES = {
    "url": "PASSsentinelUrl0006",
    "gen_kwargs": "GENKWsentinelKey0007",
    "metadata": "META-sentinel-api-key-0008",
    "generate_url": "PASSsentinelGen0009",
}


def test_every_argument_shape_is_masked_everywhere(tiny_causal_lm: str, tmp_path: Path) -> None:
    """`bias-harness eval` on an OpenAI-compatible server (loopback) with a password in its URL, a key in
    --gen_kwargs and --metadata and secrets in the environment, then `report` and `data generate` with a password in
    its --base-url: no file written (results, samples, report, generation summary) and no line printed holds a
    sentinel. A model folder named like a key (`sk-slovak-gpt2-base-cased-v2`) is not masked."""
    from bias_harness.cli import main
    from tests.generate_fake_server import Reply, fake_openai_server

    sentinels = [*SHAPES.values(), *SECRETS_ENV.values()]

    def leaks(*texts: str) -> list[str]:
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        found = [f"{p}: {s}" for p in files for s in sentinels if s.encode() in p.read_bytes()]
        return found + [f"<printed {i}>: {s}" for i, t in enumerate(texts) for s in sentinels if s in t]

    with fake_openai_server(lambda body: Reply("1. Henry")) as server:
        url = server.url.replace("http://", f"http://alice:{SHAPES['url']}@") + "/chat/completions"
        run = run_cli(
            [
                "eval",
                "--model",
                "local-chat-completions",
                "--model_args",
                f"model=fake,base_url={url},tokenizer_backend=none,max_retries=1",
                "--tasks",
                "demet",
                "--limit",
                "2",
                "--apply_chat_template",
                "--output_path",
                "run",
                "--log_samples",
                "--gen_kwargs",
                f"api_key={SHAPES['gen_kwargs']}",
                "--metadata",
                json.dumps({"api_key": SHAPES["metadata"]}),
            ],
            tmp_path,
            **SECRETS_ENV,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert server.auth_headers[0].startswith("Basic ")  # the password reached the server, and nothing else
        rep = run_cli(["report", "run", "--out", "report"], tmp_path, **SECRETS_ENV)
        assert rep.returncode == 0, rep.stderr[-3000:]
        gen_url = server.url.replace("http://", f"http://gen:{SHAPES['generate_url']}@")
        argv = ["data", "generate", "stop", "--model", "m", "--base-url", gen_url, "--data-dir", tmp_path / "gen"]
        assert main([str(a) for a in [*argv, "--n", "1", "--no-progress"]]) == 0
    assert not leaks(run.stdout, run.stderr, rep.stdout, rep.stderr)
    results = json.loads(next((tmp_path / "run").rglob("results_*.json")).read_text(encoding="utf-8"))
    assert results["config"]["model_args"]["base_url"].startswith("http://***@127.0.0.1:")
    sample = json.loads(next((tmp_path / "run").rglob("samples_*.jsonl")).read_text(encoding="utf-8").splitlines()[0])
    assert "'api_key': '***'" in json.dumps(sample["arguments"]).replace('"', "'")
    summary = json.loads(next((tmp_path / "gen").rglob("*.summary.json")).read_text(encoding="utf-8"))
    assert summary["client"]["base_url"].startswith("http://***@127.0.0.1:")

    model = tmp_path / "sk-slovak-gpt2-base-cased-v2"
    model.symlink_to(tiny_causal_lm, target_is_directory=True)
    proc = run_cli(
        ["eval", "--model", "hf", "--model_args", f"pretrained={model}", "--tasks", "demet_mc", "--limit", "1"]
        + ["--output_path", "run2", "--log_samples"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = next((tmp_path / "run2").iterdir())
    assert folder.name.endswith("sk-slovak-gpt2-base-cased-v2")
    results = json.loads(next(folder.glob("results_*.json")).read_text(encoding="utf-8"))
    assert results["config"]["model_args"]["pretrained"] == str(model)
    assert f"{folder.relative_to(tmp_path)}/*.jsonl" in proc.stderr  # the samples path logged is the real one
