"""``twinaudit oracle serve`` and ``keygen``: a model as ``twinaudit.oracle.v1.Oracle``, its key.

``--kind`` says what the model is (spec §10.1):

- ``classifier`` (the default): an image classifier, answering ``Classify``;
- ``encoder``: an image encoder (images to embeddings), answering ``EmbedImages``;
- ``lm``: a causal language model, answering ``TokenLogprobs`` — a torch module
  (ids (1, T) to logits (1, T, V)) with ``--tokenizer``, a local Hugging Face model
  directory (``--hf``), or an OpenAI-compatible completions endpoint
  (``--openai-url`` and ``--openai-model``) that this process relays to;
- ``clip``: a CLIP-style module with ``encode_image`` and ``encode_text``, with
  ``--tokenizer``, answering ``EmbedImageText``.

A model file (``--model``) is in one of the formats of
:mod:`twinaudit.practitioner.formats`, found from its name and content or named by
``--format``: TorchScript; a ``torch.export`` archive (``.pt2``); a state dict
(``torch.load`` with ``weights_only=True``) or a ``.safetensors`` file, each with
``--arch MODULE:CALLABLE``, a callable that takes no arguments and returns the
``torch.nn.Module`` to load the weights into; a whole module pickled by
``torch.save(model)``, only with ``--trust-pickle`` (with a warning on stderr:
unpickling runs code the file names); or an ONNX model (``.onnx``, run by
onnxruntime). It runs on the CPU in eval mode.

Image models are checked at start: with ``--input-shape`` (or the input shape an
ONNX model or ``torch.export`` program declares), a probe forward pass on zero images
must answer what the oracle serves, or the command stops with one line naming the
mismatch (``model-mismatch``: the input refused, another declared input shape, an
output not (N, classes), another class count than ``--n-classes``, a fixed batch, a
wrong dtype). The server prints ``listening on HOST:PORT`` (the bound port, useful
with port 0), then a line describing the model, and serves until SIGINT or SIGTERM.

``--hf DIR`` serves a Hugging Face model directory (``save_pretrained``) with
``transformers`` (:mod:`twinaudit.practitioner.hf`): ``--kind classifier`` an
``AutoModelForImageClassification`` with its own image processor (its ``logits``,
probed at start on the size the processor makes), ``--kind lm`` an
``AutoModelForCausalLM`` with its tokenizer, ``--kind clip`` a CLIP-style model with
its processor and tokenizer. The directory brings its own configuration, tokenizer and
image processor, so ``--format``, ``--arch``, ``--tokenizer``, ``--input-shape``,
``--mean`` and ``--std`` are refused with it, as is ``--kind encoder``.

``--deterministic`` (a classifier or encoder file) runs torch with
``torch.use_deterministic_algorithms(True)`` (one thread unless ``--threads`` says
otherwise) and appends ``"; deterministic, N thread(s), cpu CAPABILITY"`` to the
framework Describe reports: how the verifier runs an arbiter-held model
(:mod:`twinaudit.verifier.oracles.held`), so that ``verifier reexecute`` can recompute its answers.

``--answer-key FILE`` (a key from ``twinaudit oracle keygen``) signs every answer with
the practitioner's own Ed25519 key and names its public key in Describe (spec §10.8):
a verdict on such an oracle binds its answers to that key, so that nobody, the arbiter
included, can alter them later without replay failing.

torch is imported only when the command runs, so ``twinaudit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinaudit.cli.serve_options import (
    add_operations_args,
    add_plaintext_arg,
    check_listen,
    start_operations,
)
from twinaudit.cli.stop_signal import StopSignal
from twinaudit.protocol.errors import InputError
from twinaudit.wire.transport import is_unix_address, parse_address

if TYPE_CHECKING:
    import torch

    from twinaudit.practitioner.formats import LoadedModel

#: Seconds in-flight calls get to finish after a stop signal.
STOP_GRACE_S = 2.0
#: What ``--kind`` may name.
KINDS = ("classifier", "encoder", "lm", "clip")
#: What ``--format`` may name: :data:`twinaudit.practitioner.formats.FORMATS` (a test checks
#: they agree), spelled out so that ``--help`` imports no torch.
MODEL_FORMATS = ("torchscript", "torch-export", "state-dict", "safetensors", "pickle", "onnx")
#: Formats whose files declare their input shape.
SHAPED_FORMATS = ("torch-export", "onnx")
#: What a classifier whose file declares no fixed input shape needs (the end of the error).
NEEDS_SHAPE = (
    "give --input-shape H,W,C, the size it is fed, to probe it (claims then fit every query "
    "to that size), or --n-classes to serve it unprobed"
)


def _shape(text: str) -> tuple[int, int, int]:
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected H,W,C, got {text!r}") from None
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected three positive integers H,W,C, got {text!r}")
    return parts[0], parts[1], parts[2]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``oracle`` command (sub-command ``serve``) to the CLI."""
    oracle = subparsers.add_parser(
        "oracle",
        help="serve a model as a black-box oracle",
        description="Expose a model under audit as the twinaudit.oracle.v1.Oracle gRPC service.",
    )
    commands = oracle.add_subparsers(dest="oracle_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve a model (classifier, encoder, language model, CLIP-style)",
        description=(
            "Serve a model file on the CPU until SIGINT/SIGTERM: TorchScript, a torch.export "
            "archive (.pt2), a state dict or .safetensors weights loaded into --arch "
            "MODULE:CALLABLE, a pickled module (torch.save(model); only with --trust-pickle) "
            "or an ONNX model (.onnx, run by onnxruntime); a Hugging Face model directory (--hf: "
            "classifier, lm or clip); or, for --kind lm, an OpenAI-compatible endpoint "
            "(--openai-url). With "
            "--input-shape (or the shape an ONNX or torch.export file declares) the model is "
            "probed once on zero images before serving. Prints 'listening on HOST:PORT' once "
            "bound."
        ),
        epilog="exit status: 0 stopped by SIGINT or SIGTERM; 2 bad usage or a model that "
        "cannot be loaded or does not fit (an address without a host, a port in use, a "
        "missing file, a pickle without --trust-pickle, a probe that fails: [model-mismatch])",
    )
    serve.add_argument(
        "--kind",
        choices=KINDS,
        default="classifier",
        help="what the model is (default: classifier)",
    )
    serve.add_argument(
        "--model",
        type=Path,
        metavar="PATH",
        help="model file: TorchScript, torch.export (.pt2), state dict or .safetensors "
        "(with --arch), pickled module (with --trust-pickle), ONNX (.onnx)",
    )
    serve.add_argument(
        "--format",
        dest="model_format",
        choices=MODEL_FORMATS,
        help="the model file's format (default: found from its name and content)",
    )
    serve.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load a module pickled by torch.save(model); unpickling runs any code the "
        "file names, so give it only for a file you trust",
    )
    serve.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="for lm/clip torch modules: 'bytes' (UTF-8 bytes, BOS 256), 'bytes-no-bos', "
        "or MODULE:CALLABLE returning a tokenizer (encode(text) -> ids, bos_id)",
    )
    serve.add_argument(
        "--hf",
        type=Path,
        metavar="DIR",
        help="a Hugging Face model directory (save_pretrained) for --kind classifier (with its "
        "image processor), lm or clip (with its tokenizer); read with local files only",
    )
    serve.add_argument(
        "--openai-url", metavar="URL", help="lm: an OpenAI-compatible base URL (http://host/v1)"
    )
    serve.add_argument("--openai-model", metavar="NAME", help="lm: the model name at --openai-url")
    serve.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="lm: environment variable holding the endpoint's API key",
    )
    serve.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="lm/clip torch modules: most tokens per text, BOS included (longer are refused)",
    )
    serve.add_argument(
        "--arch",
        metavar="MODULE:CALLABLE",
        help="callable returning the nn.Module a state dict or safetensors file is loaded into",
    )
    serve.add_argument(
        "--listen",
        required=True,
        metavar="HOST:PORT",
        help="address to listen on (port 0 picks a free port)",
    )
    serve.add_argument(
        "--n-classes",
        type=int,
        metavar="N",
        help="number of classes (default: found by the probe of --input-shape)",
    )
    serve.add_argument(
        "--input-shape",
        type=_shape,
        metavar="H,W,C",
        help="the image shape the model takes: probed at start (classes, batch, output) "
        "and reported by Describe (ONNX and torch.export files declare it, unless their "
        "height or width is dynamic)",
    )
    serve.add_argument(
        "--label-only", action="store_true", help="answer only the top label, never probabilities"
    )
    serve.add_argument(
        "--mean",
        type=float,
        nargs="+",
        metavar="M",
        help="per-channel mean subtracted from [0, 1] inputs",
    )
    serve.add_argument(
        "--std",
        type=float,
        nargs="+",
        metavar="S",
        help="per-channel standard deviation the inputs are divided by",
    )
    serve.add_argument(
        "--max-batch",
        type=int,
        default=256,
        metavar="N",
        help="most images per request and per forward pass (default 256)",
    )
    serve.add_argument(
        "--defence",
        action="append",
        default=[],
        metavar="SPEC",
        help="classifier: answer through an output defence (repeatable): topk:K, "
        "memguard[:BUDGET[,TARGET]], pairdetect[:EPS], pairdetect-features[:EPS]",
    )
    serve.add_argument("--name", help="model name reported by Describe (default: file name)")
    serve.add_argument("--threads", type=int, metavar="N", help="torch CPU threads")
    serve.add_argument(
        "--deterministic",
        action="store_true",
        help="deterministic torch, its settings reported by Describe (as an arbiter-held "
        "model runs, for verifier reexecute)",
    )
    # A held model's child (verifier/oracles/held.py): it stops when its stdin closes
    # (the verifier that started it stopped it, or is gone), and applies its resource
    # limits before anything loads (verifier/oracles/sandbox.py).
    serve.add_argument("--stop-on-eof", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument("--limits", metavar="AS,CPU,FSIZE,NOFILE", help=argparse.SUPPRESS)
    serve.add_argument("--tls-cert", type=Path, metavar="PEM", help="server certificate")
    serve.add_argument("--tls-key", type=Path, metavar="PEM", help="server private key")
    serve.add_argument(
        "--client-ca",
        type=Path,
        metavar="PEM",
        help="require client certificates signed by this CA (mTLS)",
    )
    serve.add_argument(
        "--answer-key",
        type=Path,
        metavar="FILE",
        help="sign every answer with this key (twinaudit oracle keygen), so that nobody, "
        "the arbiter included, can alter a recorded answer (spec §10.8)",
    )
    add_plaintext_arg(serve)
    add_operations_args(serve)
    serve.set_defaults(handler=run_serve)
    keygen = commands.add_parser(
        "keygen",
        help="make the oracle's Ed25519 answer key (for serve --answer-key)",
        description="Write a new Ed25519 private key (PKCS#8 PEM, mode 0600) and its public "
        "key (FILE.pub). An existing file is never overwritten.",
    )
    keygen.add_argument("--key", type=Path, required=True, metavar="FILE", help="key file")
    keygen.set_defaults(handler=run_keygen)


def _resolve(spec: str) -> Any:
    from twinaudit.practitioner.formats import resolve_callable

    return resolve_callable(spec)


def load_model(args: argparse.Namespace) -> LoadedModel:
    """Load ``--model`` in its format (``--format``, ``--arch``, ``--trust-pickle``).

    A pickle is loaded only with ``--trust-pickle``, and then with a warning on stderr.
    Every failure is an InputError.
    """
    from twinaudit.practitioner.formats import detect_format
    from twinaudit.practitioner.formats import load_model as load_file

    model_format = args.model_format or detect_format(args.model, args.arch)
    if model_format == "pickle" and args.trust_pickle:
        print(
            f"twinaudit: warning: --trust-pickle: unpickling {str(args.model)!r} runs any code "
            "the file names; serve a pickle only from a source you trust",
            file=sys.stderr,
            flush=True,
        )
    return load_file(
        args.model,
        arch=args.arch,
        model_format=model_format,
        trust_pickle=args.trust_pickle,
        threads=args.threads,
    )


def _tls(args: argparse.Namespace) -> Any:
    from twinaudit.wire.transport import TlsFiles

    if args.tls_cert is None and args.tls_key is None and args.client_ca is None:
        return None
    if args.tls_cert is None or args.tls_key is None:
        raise InputError("--tls-cert and --tls-key go together")
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        if path is not None and not path.is_file():
            raise InputError(f"TLS file {str(path)!r} does not exist")
    return TlsFiles(cert=args.tls_cert, key=args.tls_key, ca=args.client_ca)


def _tokenizer(name: str | None) -> Any:
    from twinaudit.practitioner.tokenizer import ByteTokenizer, Tokenizer

    if name is None:
        raise InputError("this kind of model needs --tokenizer")
    if name in ("bytes", "bytes-no-bos"):
        return ByteTokenizer(bos=name == "bytes")
    tokenizer = _resolve(name)()
    if not isinstance(tokenizer, Tokenizer):
        raise InputError(f"{name!r} did not return a tokenizer (encode(text), bos_id)")
    return tokenizer


def _loaded_model(args: argparse.Namespace) -> LoadedModel:
    if args.model is None:
        raise InputError(f"--kind {args.kind} needs --model")
    loaded = load_model(args)
    if getattr(args, "deterministic", False):
        import dataclasses

        loaded = dataclasses.replace(
            loaded, framework=loaded.framework + determinism_note(args.threads or 1)
        )
    return loaded


def determinism_note(threads: int) -> str:
    """Return what ``--deterministic`` adds to the framework text Describe reports.

    ``"; deterministic, 1 thread, cpu AVX2"``: torch's deterministic algorithms, the
    CPU threads, and the CPU capability torch dispatches its kernels to (the conditions
    under which ``verifier reexecute`` recomputes the answers bit for bit).
    """
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return f"; deterministic, {threads} thread{'s' if threads != 1 else ''}, cpu {capability}"


def _torch_model(args: argparse.Namespace) -> torch.nn.Module:
    """Load a torch module for --kind lm or clip (not ONNX: those need methods or ids)."""
    loaded = _loaded_model(args)
    if loaded.model_format == "onnx":
        raise InputError(f"--kind {args.kind} serves torch modules, not ONNX models")
    return loaded.module


def _language_model(args: argparse.Namespace) -> Any:
    from twinaudit.practitioner.hf import load_hf_language_model
    from twinaudit.practitioner.openai_lm import OpenAICompletionsOracle
    from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle

    sources = [args.model is not None, args.hf is not None, args.openai_url is not None]
    if sum(sources) != 1:
        raise InputError("--kind lm needs exactly one of --model, --hf, --openai-url")
    if args.openai_url is not None:
        if not args.openai_model:
            raise InputError("--openai-url needs --openai-model")
        key = None
        if args.api_key_env:
            key = os.environ.get(args.api_key_env)
            if not key:
                raise InputError(f"environment variable {args.api_key_env} is not set")
        return OpenAICompletionsOracle(
            args.openai_url,
            args.openai_model,
            api_key=key,
            max_batch=min(args.max_batch, 4096),
        )
    if args.hf is not None:
        _check_hf(args)
        return load_hf_language_model(
            args.hf, model_name=args.name, max_batch=args.max_batch, max_tokens=args.max_tokens
        )
    return TorchLanguageModelOracle(
        _torch_model(args),
        _tokenizer(args.tokenizer),
        model_name=args.name or args.model.name,
        max_batch=args.max_batch,
        max_tokens=args.max_tokens,
    )


def _image_model_options(args: argparse.Namespace) -> dict[str, Any]:
    """Return the options every torch image model's oracle takes (name, normalisation, batch)."""
    return {
        "model_name": args.name or args.model.name,
        "mean": args.mean,
        "std": args.std,
        "max_batch": args.max_batch,
    }


def make_oracle(args: argparse.Namespace) -> Any:
    """Build the oracle that ``--kind`` and the model options describe."""
    if getattr(args, "hf", None) is not None and args.kind != "lm":
        return _hf_oracle(args)
    if args.kind == "classifier":
        from twinaudit.practitioner.torch_oracle import TorchClassifierOracle

        loaded = _loaded_model(args)
        if args.n_classes is None and args.input_shape is None and loaded.input_shape is None:
            from twinaudit.practitioner.formats import undeclared_shape

            raise InputError(f"{undeclared_shape(loaded)}: {NEEDS_SHAPE}")
        from twinaudit.practitioner.defences import wrap

        return wrap(
            TorchClassifierOracle(
                loaded,
                n_classes=args.n_classes,
                probe_shape=args.input_shape,
                label_only=args.label_only,
                **_image_model_options(args),
            ),
            getattr(args, "defence", []),
        )
    if getattr(args, "defence", None):
        raise InputError("--defence applies to --kind classifier")
    if args.kind == "encoder":
        from twinaudit.practitioner.torch_encoder import TorchEncoderOracle

        return TorchEncoderOracle(
            _loaded_model(args), probe_shape=args.input_shape, **_image_model_options(args)
        )
    if args.kind == "clip":
        from twinaudit.practitioner.torch_encoder import TorchImageTextOracle

        return TorchImageTextOracle(
            _torch_model(args),
            _tokenizer(args.tokenizer),
            max_tokens=args.max_tokens,
            **_image_model_options(args),
        )
    return _language_model(args)


def _check_hf(args: argparse.Namespace) -> None:
    """Refuse what ``--hf`` does not go with (the directory brings its own)."""
    if args.kind == "encoder":
        raise InputError("--hf serves --kind classifier, lm or clip; an encoder needs --model")
    if args.kind != "lm" and args.model is not None:
        raise InputError(f"--kind {args.kind} needs exactly one of --model, --hf")
    options = {
        "--format": args.model_format,
        "--arch": args.arch,
        "--tokenizer": args.tokenizer,
        "--input-shape": args.input_shape,
        "--mean": args.mean,
        "--std": args.std,
    }
    given = [flag for flag, value in options.items() if value is not None]
    if given:
        raise InputError(
            f"{', '.join(given)} cannot go with --hf: the model directory brings its own "
            "configuration, tokenizer and image processor"
        )


def _hf_oracle(args: argparse.Namespace) -> Any:
    """Build the oracle of a Hugging Face classifier or CLIP-style model (``--hf``)."""
    _check_hf(args)
    if args.kind == "classifier":
        from twinaudit.practitioner.defences import wrap
        from twinaudit.practitioner.hf import load_hf_classifier

        oracle = load_hf_classifier(
            args.hf,
            model_name=args.name,
            n_classes=args.n_classes,
            label_only=args.label_only,
            max_batch=args.max_batch,
        )
        return wrap(oracle, getattr(args, "defence", []))
    if getattr(args, "defence", None):
        raise InputError("--defence applies to --kind classifier")
    from twinaudit.practitioner.hf import load_hf_image_text

    return load_hf_image_text(
        args.hf, model_name=args.name, max_batch=args.max_batch, max_tokens=args.max_tokens
    )


def _may_declare_shape(args: argparse.Namespace) -> bool:
    """Tell whether ``--model`` may declare its input shape (ONNX, torch.export)."""
    if args.model is None:
        return False
    if args.model_format is not None:
        return bool(args.model_format in SHAPED_FORMATS)
    return args.model.suffix.lower() in (".onnx", ".pt2")


def run_keygen(args: argparse.Namespace) -> int:
    """Write a new answer key and its public key; return the exit status."""
    from twinaudit.protocol.keys import write_keypair

    if not args.key.parent.is_dir():
        raise InputError(f"{args.key.parent} is not a folder: create it first (mkdir -p)")
    write_keypair(args.key)
    print(f"wrote {args.key} and {args.key}.pub")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Load the model, serve it until SIGINT/SIGTERM, and return the exit status."""
    if args.limits is not None:  # a held model's child: limited before anything loads
        from twinaudit.verifier.oracles.sandbox import apply_limits

        apply_limits(args.limits)
    if (
        args.kind == "classifier"
        and args.hf is None
        and args.n_classes is None
        and args.input_shape is None
        and not _may_declare_shape(args)
    ):
        raise InputError(
            f"only ONNX and torch.export files declare their input shape: {NEEDS_SHAPE}"
        )
    if args.trust_pickle and args.model is None:
        raise InputError("--trust-pickle goes with --model")
    if args.defence:  # a bad --defence is refused before any loading
        from twinaudit.practitioner.defences import parse_defence

        if args.kind != "classifier":
            raise InputError("--defence applies to --kind classifier")
        for text in args.defence:
            parse_defence(text)
    # Before any loading; a held model's child listens on a Unix socket (unix:/PATH), which
    # no network reaches: the plaintext rule is for network addresses.
    unix = is_unix_address(args.listen)
    host = "" if unix else parse_address(args.listen, what="--listen", port_zero=True)[0]
    if not unix:
        check_listen(args, host)
    tls = _tls(args)
    if args.answer_key is not None:  # loaded (and its mode checked) before any model
        from twinaudit.protocol.keys import load_private_key

        args.answer_key = load_private_key(args.answer_key)
    if args.threads is not None and args.threads < 1:
        raise InputError("--threads must be at least 1")
    ops = start_operations(args)  # logs, and the metrics endpoint (its port checked first)
    try:
        return _serve_until_stopped(args, host, tls, ops)
    finally:
        ops.close()


def _serve_until_stopped(args: argparse.Namespace, host: str, tls: Any, ops: Any) -> int:
    """Load the model and serve it with ``ops``'s metrics until SIGINT/SIGTERM."""
    import torch

    from twinaudit.practitioner.grpc_server import serve_oracle
    from twinaudit.protocol.keys import key_id

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.deterministic:
        if args.kind not in ("classifier", "encoder") or args.model is None:
            raise InputError("--deterministic serves a --model of --kind classifier or encoder")
        torch.use_deterministic_algorithms(True)
        if args.threads is None:
            torch.set_num_threads(1)
    oracle = make_oracle(args)
    with StopSignal() as stop:
        # A port in use is refused by make_server with a one-line InputError.
        server, port = serve_oracle(
            oracle,
            args.listen,
            tls=tls,
            metrics=ops.metrics,
            reflection=args.reflection,
            answer_key=args.answer_key,
        )
        info = oracle.info
        print(f"listening on {f'{host}:{port}' if host else args.listen}", flush=True)
        if ops.metrics_address is not None:
            print(f"metrics on http://{ops.metrics_address}/metrics", flush=True)
        print(_model_line(args.kind, info), flush=True)
        if args.answer_key is not None:
            public = args.answer_key.public_key()
            print(f"answers signed by key {key_id(public)}", flush=True)
        if info.framework and not info.input_shape and args.kind in ("classifier", "encoder"):
            print(
                "twinaudit: note: no probe ran (give --input-shape H,W,C to check the model "
                "before serving)",
                file=sys.stderr,
                flush=True,
            )
        if args.stop_on_eof:  # the verifier that started this held model stopped it or is gone
            threading.Thread(target=_stop_at_eof, args=(stop,), daemon=True).start()
        stop.wait()
        server.stop(STOP_GRACE_S).wait()
    return 0


def _stop_at_eof(stop: StopSignal) -> None:
    """Stop the server once stdin is closed (read to its end)."""
    while sys.stdin.buffer.read(4096):
        pass
    stop.stop()


def _model_line(kind: str, info: Any) -> str:
    """Return the line describing the served model (printed after ``listening on``)."""
    if kind == "classifier":
        line = (
            f"model {info.model_name} sha256 {info.model_digest} classes {info.n_classes} "
            f"output {info.classify_output}"
        )
    else:
        line = (
            f"model {info.model_name} digest {info.model_digest} "
            f"capabilities {','.join(info.capabilities)}"
        )
    if info.model_format:
        line += f" format {info.model_format}"
    if info.framework:
        line += f" framework {info.framework.replace(' ', '-')}"
    if info.input_shape:
        line += f" input {','.join(map(str, info.input_shape))}"
    return line
