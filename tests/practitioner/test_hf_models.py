"""Hugging Face models served with ``oracle serve --hf DIR``, for real (issue #23 item 2).

Tiny models built from configs with seeded random weights and saved with
``save_pretrained`` (:mod:`tests.support.hf_models`): a ViT image classifier with its
image processor, a one-layer GPT-2 with its tokenizer, and a CLIP model with both.
Nothing is faked and nothing is downloaded (``HF_HUB_OFFLINE=1``, local files only).

- ``transformers`` imports in the project's environment (a fresh interpreter, through
  the torchvision shim).
- Each model is served by ``twinaudit oracle serve --hf DIR`` as a real process:
  Describe reports the framework, the format and the digest of the weights, and the
  answers over gRPC equal what ``transformers`` computes directly from the directory.
- A claim through a real arbiter against each model, served by the command's own
  ``make_oracle``, ends in a signed verdict whose model section says what was served,
  and which replays; a GPT-2 fine-tuned on the published texts is DETECTED, the
  untrained one NOT DETECTED.
- What does not fit is refused at ``serve`` time: exit 2, one typed line, nothing served.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from tests.cli.test_cmd_oracle import ROOT, _serve  # noqa: E402
from tests.support import foundation as fm  # noqa: E402
from tests.support import hf_models as hm  # noqa: E402
from tests.support.arbiter import sqlite_arbiter  # noqa: E402
from tests.support.claims import claim_params  # noqa: E402
from tests.support.cli_processes import stop_served  # noqa: E402
from twinaudit.cli import cmd_oracle  # noqa: E402
from twinaudit.cli.main import build_parser  # noqa: E402
from twinaudit.cli.main import main as cli_main  # noqa: E402
from twinaudit.owner.claim_client import run_claim  # noqa: E402
from twinaudit.practitioner.grpc_server import serve_oracle  # noqa: E402
from twinaudit.practitioner.hf import HF_FORMAT, import_transformers, load_hf_language_model  # noqa: E402
from twinaudit.practitioner.torch_oracle import state_dict_digest  # noqa: E402
from twinaudit.protocol.claim.verdict import check_verdict  # noqa: E402
from twinaudit.protocol.errors import InputError, ParameterError  # noqa: E402
from twinaudit.protocol.seeds import publication_bits  # noqa: E402
from twinaudit.verifier.oracles.grpc_client import GrpcOracle  # noqa: E402
from twinaudit.verifier.replay import replay  # noqa: E402
from twinaudit.wire.observe import configure_logging  # noqa: E402
from twinaudit.wire.transport import make_channel  # noqa: E402
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb  # noqa: E402
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc  # noqa: E402

#: Pairs in each escrowed record.
N = 24
#: The kinds ``--hf`` serves, with the capability each answers.
KINDS = {"classifier": "classify", "lm": "token-logprobs", "clip": "embed-image-text"}
TEXTS = ["amber falcon echo", "lumen kindle", "a probe of the words"]


@pytest.fixture(scope="module", autouse=True)
def _offline() -> Iterator[None]:
    """No hub calls: the loaders read local files only, and the hub is told it is offline."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three tiny models, each saved in its own directory."""
    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("hf")
    builders = {"classifier": hm.image_classifier, "lm": hm.causal_lm, "clip": hm.clip}
    out = {}
    for kind, build in builders.items():
        directory = base / f"tiny-{kind}"
        directory.mkdir()
        out[kind] = build(directory)
    return out


def _images(n: int, height: int = 20, width: int = 24, seed: int = 0) -> Any:
    """Grey images of a size the models were not made for (their processors resize)."""
    return np.random.default_rng(seed).random((n, height, width, 1), dtype=np.float32)


def _pretrained(auto: str, directory: Path) -> Any:
    transformers = import_transformers()
    return getattr(transformers, auto).from_pretrained(str(directory), local_files_only=True)


def _reference(kind: str, directory: Path, images: Any, texts: list[str]) -> dict[str, Any]:
    """What ``transformers`` computes from the directory, without the oracle's code.

    The processor is given a list of channels-last RGB arrays (the oracle hands it one
    channels-first tensor), so the two paths share only the model and its processor.
    """
    rgb = list(np.repeat(images, 3, axis=3))
    out: dict[str, Any] = {}
    with torch.no_grad():
        if kind == "classifier":
            model = _pretrained("AutoModelForImageClassification", directory).float().eval()
            processor = _pretrained("AutoImageProcessor", directory)
            pixels = processor(
                images=rgb, do_rescale=False, input_data_format="channels_last", return_tensors="pt"
            )["pixel_values"]
            logits = model(pixel_values=pixels).logits.double()
            out["probabilities"] = torch.softmax(logits, dim=1).numpy()
        elif kind == "lm":
            model = _pretrained("AutoModelForCausalLM", directory).float().eval()
            tokenizer = _pretrained("AutoTokenizer", directory)
            rows = []
            for text in texts:
                ids = [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False).input_ids]
                logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].double()
                logp = torch.log_softmax(logits, dim=-1)
                rows.append(logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy())
            out["logprobs"] = rows
        else:
            model = _pretrained("AutoModel", directory).float().eval()
            processor = _pretrained("AutoImageProcessor", directory)
            tokenizer = _pretrained("AutoTokenizer", directory)
            pixels = processor(
                images=rgb, do_rescale=False, input_data_format="channels_last", return_tensors="pt"
            )["pixel_values"]
            out["images"] = model.get_image_features(pixel_values=pixels).pooler_output.double()
            out["texts"] = torch.cat(
                [
                    model.get_text_features(
                        input_ids=tokenizer(text, return_tensors="pt").input_ids
                    ).pooler_output
                    for text in texts
                ]
            ).double()
        out["digest"] = state_dict_digest(model)
    return out


@pytest.mark.slow
def test_transformers_imports_in_a_fresh_interpreter() -> None:
    """The shim comes first, so transformers and its torchvision-backed parts import."""
    code = (
        "from twinaudit.practitioner.hf import import_transformers\n"
        "import_transformers()\n"
        "from transformers import AutoImageProcessor, CLIPModel, GPT2LMHeadModel\n"
        "from transformers import ViTForImageClassification\n"
        "import torchvision\n"
        "print(torchvision.__version__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def _stop(process: Any) -> str:
    return stop_served(process)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_served_with_hf_answers_what_transformers_computes(dirs, kind):
    directory = dirs[kind]
    images = _images(3)
    reference = _reference(kind, directory, images, TEXTS)
    process, address = _serve("--kind", kind, "--hf", str(directory), "--max-batch", "2")
    try:
        model_line = process.stdout.readline()
        channel = make_channel(address)
        remote = GrpcOracle(channel, timeout_s=60)
        info = remote.info
        transformers = import_transformers()
        assert (
            info.framework
            == f"transformers {transformers.__version__} on torch {torch.__version__}"
        )
        assert info.model_format == HF_FORMAT == "huggingface"
        assert info.model_digest == reference["digest"]
        assert info.model_name == directory.name
        assert info.capabilities == (KINDS[kind],)
        assert info.max_batch == 2
        assert " format huggingface framework transformers-" in model_line, model_line
        if kind == "classifier":
            # The processor resizes every image to 16x16 RGB: that is the shape probed.
            assert (info.n_classes, info.input_shape) == (hm.CLASSES, (hm.SIDE, hm.SIDE, 3))
            assert model_line.endswith(f"input {hm.SIDE},{hm.SIDE},3\n"), model_line
            answer = remote.classify(images).probabilities  # 3 images: batches of 2 and 1
            np.testing.assert_allclose(answer, reference["probabilities"], rtol=0, atol=1e-6)
        elif kind == "lm":
            answer = remote.token_logprobs(TEXTS).logprobs
            assert [len(row) for row in answer] == [len(row) for row in reference["logprobs"]]
            for got, want in zip(answer, reference["logprobs"], strict=True):
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        else:
            answer = remote.embed_image_text(images, TEXTS)
            np.testing.assert_allclose(answer.images, reference["images"], rtol=0, atol=1e-5)
            np.testing.assert_allclose(answer.texts, reference["texts"], rtol=0, atol=1e-5)
        channel.close()
    finally:
        err = _stop(process)
    assert "Traceback" not in err and "Loading weights" not in err, err


@pytest.fixture(scope="module")
def arbiter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    with sqlite_arbiter(tmp_path_factory.mktemp("arbiter"), key) as address:
        channel = make_channel(address)
        yield {"key": key, "channel": channel}
        channel.close()


def _served(*args: str) -> tuple[Any, str]:
    """Serve what ``oracle serve ARGS`` would, in-process; return the server and endpoint."""
    parsed = build_parser().parse_args(["oracle", "serve", "--listen", "127.0.0.1:0", *args])
    server, port = serve_oracle(cmd_oracle.make_oracle(parsed), "127.0.0.1:0")
    return server, f"127.0.0.1:{port}"


def _escrowed(arbiter: dict[str, Any], kind: str, pairs: list[Any]) -> tuple[Any, Any]:
    owner = fm.commit(kind, pairs)
    receipt = owner.escrow(arbiter["channel"], arbiter["key"].public_key(), "hf owner")
    return owner, receipt


def _claim(
    arbiter: dict[str, Any], owner: Any, receipt: Any, endpoint: str, **fields: Any
) -> dict[str, Any]:
    """File a claim, check the signed verdict and replay it; return the verdict."""
    request = claim_params(
        receipt.entry.index,
        owner.root,
        endpoint,
        "hf",
        **fields,
    )
    outcome = run_claim(
        arbiter["channel"], request, owner.opening, claim_key=owner.claim_key, timeout_s=300
    )
    verdict = check_verdict(outcome.verdict, arbiter["key"].public_key())
    stored = pb_grpc.VerifierStub(arbiter["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
    )
    assert replay(verdict, stored.transcript).decision == verdict.decision
    return verdict


def _check_model_section(verdict: dict[str, Any], directory: Path) -> dict[str, Any]:
    oracle = verdict.claim.oracle
    assert oracle["model_format"] == "huggingface"
    assert oracle["framework"].startswith("transformers ")
    assert oracle["model_name"] == directory.name
    return oracle


@pytest.mark.slow
def test_a_claim_against_an_hf_classifier(dirs, arbiter):
    owner, receipt = _escrowed(arbiter, "image", fm.marked_images(N, seed=0))
    server, endpoint = _served("--hf", str(dirs["classifier"]))
    try:
        verdict = _claim(arbiter, owner, receipt, endpoint, knowledge="C2", max_pairs=8)
    finally:
        server.stop(None)
    oracle = _check_model_section(verdict, dirs["classifier"])
    assert oracle["input_shape"] == [hm.SIDE, hm.SIDE, 3]
    assert oracle["n_classes"] == hm.CLASSES and oracle["classify_output"] == "probabilities"
    model = _pretrained("AutoModelForImageClassification", dirs["classifier"]).float()
    assert oracle["model_digest"] == state_dict_digest(model)
    # A model with random weights answers by chance (each indicator a fair coin): the
    # decision is whatever the coins gave; the verdict says what was queried.
    assert 1 <= len(verdict.indicators) <= len(verdict.opened) <= 8


@pytest.mark.slow
def test_a_claim_against_an_hf_clip_model(dirs, arbiter):
    owner, receipt = _escrowed(arbiter, "captioned-image", fm.captioned_pairs(N, seed=0))
    server, endpoint = _served("--kind", "clip", "--hf", str(dirs["clip"]))
    try:
        verdict = _claim(
            arbiter,
            owner,
            receipt,
            endpoint,
            function="image-text",
            max_pairs=8,
        )
    finally:
        server.stop(None)
    oracle = _check_model_section(verdict, dirs["clip"])
    assert "input_shape" not in oracle
    assert oracle["model_digest"] == state_dict_digest(_pretrained("AutoModel", dirs["clip"]))
    assert 1 <= len(verdict.indicators) <= len(verdict.opened) <= 8


@pytest.mark.slow
def test_an_hf_lm_fine_tuned_on_the_published_texts_is_detected(dirs, arbiter, tmp_path):
    pairs = fm.text_pairs(N, seed=0)
    owner, receipt = _escrowed(arbiter, "text", pairs)
    bits = publication_bits(owner.root, receipt.rho, N)
    texts = [item.text for item in fm.published(pairs, bits)]
    trained = hm.train_causal_lm(dirs["lm"], tmp_path / "tiny-lm-trained", texts)
    decisions = {}
    for name, directory in (("trained", trained), ("untrained", dirs["lm"])):
        server, endpoint = _served("--kind", "lm", "--hf", str(directory))
        try:
            verdict = _claim(arbiter, owner, receipt, endpoint, function="language-model")
        finally:
            server.stop(None)
        oracle = _check_model_section(verdict, directory)
        model = _pretrained("AutoModelForCausalLM", directory).float()
        assert oracle["model_digest"] == state_dict_digest(model)
        decisions[name] = verdict.decision
    assert decisions == {"trained": "detected", "untrained": "not-detected"}


def _no_serving(*_: Any, **__: Any) -> Any:
    raise AssertionError("the model was served; it should have been refused")


def test_what_does_not_fit_is_refused_at_serve_time(dirs, tmp_path, capsys, monkeypatch):
    """One row per refusal: exit 2, one typed line on stderr, nothing served."""
    monkeypatch.setattr("twinaudit.practitioner.grpc_server.serve_oracle", _no_serving)
    classifier, lm, clip = (str(dirs[k]) for k in ("classifier", "lm", "clip"))
    empty = tmp_path / "empty"
    empty.mkdir()
    no_processor = tmp_path / "no-processor"
    shutil.copytree(dirs["classifier"], no_processor)
    (no_processor / "preprocessor_config.json").unlink()
    broken = tmp_path / "broken-weights"
    shutil.copytree(dirs["classifier"], broken)
    (broken / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    # The ViT body without its classifier head: transformers would draw the head at random.
    headless = tmp_path / "headless"
    transformers = import_transformers()
    transformers.ViTModel.from_pretrained(classifier, local_files_only=True).save_pretrained(
        headless
    )
    shutil.copy(dirs["classifier"] / "preprocessor_config.json", headless)
    # A server's log handler on the root logger, as a served command has: transformers'
    # own loading report must not reach it (the refusal stays one line).
    restore = configure_logging("info")
    cases: list[tuple[tuple[str, ...], str]] = [
        (("--kind", "encoder", "--hf", classifier), "--hf serves --kind classifier, lm or clip"),
        (("--hf", classifier, "--model", "m.pt"), "needs exactly one of --model, --hf"),
        (("--kind", "clip", "--hf", clip, "--model", "m.pt"), "needs exactly one of --model"),
        (("--kind", "lm", "--hf", lm, "--model", "m.pt"), "exactly one of --model, --hf"),
        (("--hf", classifier, "--input-shape", "16,16,3"), "--input-shape cannot go with --hf"),
        (("--hf", classifier, "--mean", "0.5", "--std", "0.2"), "--mean, --std cannot go"),
        (("--hf", classifier, "--format", "onnx"), "--format cannot go with --hf"),
        (("--kind", "lm", "--hf", lm, "--tokenizer", "bytes"), "--tokenizer cannot go"),
        (("--kind", "clip", "--hf", clip, "--arch", "m:f"), "--arch cannot go with --hf"),
        (("--hf", classifier, "--trust-pickle"), "--trust-pickle goes with --model"),
        (("--kind", "clip", "--hf", clip, "--defence", "topk:1"), "--defence applies to"),
        (("--hf", str(tmp_path / "missing")), "not a directory"),
        (("--hf", str(empty)), "not a Hugging Face model directory (no config.json)"),
        (("--kind", "lm", "--hf", str(empty)), "cannot load a causal LM"),
        (("--hf", lm), "cannot load an image classifier"),
        (("--kind", "lm", "--hf", classifier), "cannot load a causal LM"),
        (("--kind", "clip", "--hf", classifier), "not a CLIP-style model"),
        (("--kind", "clip", "--hf", lm), "not a CLIP-style model"),
        (("--hf", str(no_processor)), "has no image processor"),
        (("--hf", str(broken)), "cannot load an image classifier"),
        (("--hf", classifier, "--n-classes", "7"), "[model-mismatch] class-count: "),
        (("--hf", str(headless)), "the checkpoint lacks 2 of its weights (classifier.bias"),
    ]
    capsys.readouterr()
    try:
        for args, message in cases:
            status = cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", *args])
            err = capsys.readouterr().err
            assert status == 2, (args, err)
            assert err.count("\n") == 1 and err.startswith("twinaudit: error: ["), (args, err)
            assert message in err, (args, err)
    finally:
        restore()


def test_loaders_in_process(dirs):
    """The loaders bound an LM's texts, and need transformers (a ParameterError without)."""
    oracle = load_hf_language_model(dirs["lm"], max_tokens=4, model_name="named")
    assert oracle.info.model_name == "named"
    with pytest.raises(InputError, match=r"more than the model's 4"):
        oracle.token_logprobs(["amber candle dapple echo falcon"])
    # The context length bounds the texts when no smaller bound is given.
    assert len(load_hf_language_model(dirs["lm"]).token_logprobs(["amber"]).logprobs[0]) >= 1


def test_without_transformers_the_loaders_say_what_is_missing(dirs, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ParameterError, match="'transformers' package"):
        load_hf_language_model(dirs["lm"])


@pytest.mark.slow
def test_a_pickled_hf_classifier_is_refused_at_serve_time_pointing_to_hf(dirs, tmp_path):
    """``--model`` with a whole pickled transformers model, in a fresh process.

    Unpickling imports transformers (so torchvision: the shim is prepared first); the
    probe then finds a ``ModelOutput``, not logits, and the command stops with one line
    that names ``--hf``, before anything is served.
    """
    path = tmp_path / "vit.pt"
    model = _pretrained("AutoModelForImageClassification", dirs["classifier"])
    torch.save(model, path)
    command = [sys.executable, "-m", "twinaudit", "oracle", "serve", "--listen", "127.0.0.1:0"]
    result = subprocess.run(
        [*command, "--model", str(path), "--trust-pickle", "--input-shape", "16,16,3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("twinaudit: error: [model-mismatch] output-shape: "), result.stderr
    assert "ImageClassifierOutput" in last and "--hf" in last, last
    assert result.stdout == ""
