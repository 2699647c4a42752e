"""``twinaudit oracle serve``: expose a model as ``twinaudit.oracle.v1.Oracle``.

``--kind`` says what the model is (spec §10.1):

- ``classifier`` (the default): an image classifier, answering ``Classify``;
- ``encoder``: an image encoder (images to embeddings), answering ``EmbedImages``;
- ``lm``: a causal language model, answering ``TokenLogprobs`` — a torch module
  (ids (1, T) to logits (1, T, V)) with ``--tokenizer``, a local Hugging Face model
  directory (``--hf``), or an OpenAI-compatible completions endpoint
  (``--openai-url`` and ``--openai-model``) that this process relays to;
- ``clip``: a CLIP-style module with ``encode_image`` and ``encode_text``, with
  ``--tokenizer``, answering ``EmbedImageText``.

A torch model is a state dict (``torch.load`` with ``weights_only=True``) plus
``--arch MODULE:CALLABLE``, a callable that takes no arguments and returns the
``torch.nn.Module`` to load it into; or a ``torch.export`` archive (a ``.pt2`` file);
or a TorchScript file (``torch.jit.load``). It runs on the CPU in eval mode. The
server prints ``listening on HOST:PORT`` (the bound port, useful with port 0) and
serves until SIGINT or SIGTERM.

torch is imported only when the command runs, so ``twinaudit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import InputError
from twinaudit.serve_options import add_operations_args, start_operations
from wire.transport import parse_address

if TYPE_CHECKING:
    import torch

#: Seconds in-flight calls get to finish after a stop signal.
STOP_GRACE_S = 2.0
#: What ``--kind`` may name.
KINDS = ("classifier", "encoder", "lm", "clip")


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
            "Serve a state dict loaded into --arch MODULE:CALLABLE, a torch.export archive "
            "(.pt2) or a TorchScript file on the CPU until SIGINT/SIGTERM; or, for --kind "
            "lm, a Hugging Face model directory (--hf) or an OpenAI-compatible endpoint "
            "(--openai-url). Prints 'listening on HOST:PORT' once bound."
        ),
        epilog="exit status: 0 stopped by SIGINT or SIGTERM; 2 bad usage or a model that "
        "cannot be loaded (an address without a host, a port in use, a missing file)",
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
        help="state dict (with --arch), torch.export archive (.pt2) or TorchScript file",
    )
    serve.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="for lm/clip torch modules: 'bytes' (UTF-8 bytes, BOS 256), 'bytes-no-bos', "
        "or MODULE:CALLABLE returning a tokenizer (encode(text) -> ids, bos_id)",
    )
    serve.add_argument("--hf", type=Path, metavar="DIR", help="lm: a Hugging Face model directory")
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
        help="callable returning the nn.Module the state dict is loaded into",
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
        help="number of classes (default: found by running --input-shape)",
    )
    serve.add_argument(
        "--input-shape",
        type=_shape,
        metavar="H,W,C",
        help="an input shape used to probe the number of classes",
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
    serve.add_argument("--name", help="model name reported by Describe (default: file name)")
    serve.add_argument("--threads", type=int, metavar="N", help="torch CPU threads")
    serve.add_argument("--tls-cert", type=Path, metavar="PEM", help="server certificate")
    serve.add_argument("--tls-key", type=Path, metavar="PEM", help="server private key")
    serve.add_argument(
        "--client-ca",
        type=Path,
        metavar="PEM",
        help="require client certificates signed by this CA (mTLS)",
    )
    add_operations_args(serve)
    serve.set_defaults(handler=run_serve)


def _resolve(spec: str) -> Any:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise InputError(f"--arch must be MODULE:CALLABLE, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InputError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InputError(f"{spec!r} is not callable")
    return target


def load_model(path: Path, arch: str | None) -> torch.nn.Module:
    """Load the model ``--model``/``--arch`` name; every failure is an InputError.

    With ``arch``: a state dict (``torch.load(weights_only=True)``) loaded strictly
    into ``arch()``. Without: a ``.pt2`` file is a ``torch.export`` archive
    (``torch.export.load(path).module()``), anything else TorchScript.
    """
    import torch

    if not path.is_file():
        raise InputError(f"model file {str(path)!r} does not exist")
    if arch is None and path.suffix == ".pt2":
        try:
            exported: torch.nn.Module = torch.export.load(path).module()
        except Exception as exc:  # torch raises many types for unreadable archives
            raise InputError(
                f"cannot load the torch.export archive {str(path)!r}: {_first_line(exc)}"
            ) from None
        return exported
    if arch is None:
        try:
            scripted: torch.nn.Module = torch.jit.load(  # type: ignore[no-untyped-call]
                str(path), map_location="cpu"
            )
        except (RuntimeError, ValueError) as exc:
            raise InputError(
                f"{str(path)!r} is not TorchScript (a state dict needs --arch, "
                f"a torch.export archive ends in .pt2): {_first_line(exc)}"
            ) from None
        return scripted
    model = _resolve(arch)()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"{arch!r} returned {type(model).__name__}, not a torch.nn.Module")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for unreadable files
        raise InputError(f"cannot read a state dict from {str(path)!r}: {exc}") from None
    if not isinstance(state, dict):
        raise InputError(f"{str(path)!r} holds {type(state).__name__}, not a state dict")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise InputError(f"the state dict does not fit {arch!r}: {exc}") from None
    return model


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _tls(args: argparse.Namespace) -> Any:
    from wire.transport import TlsFiles

    if args.tls_cert is None and args.tls_key is None and args.client_ca is None:
        return None
    if args.tls_cert is None or args.tls_key is None:
        raise InputError("--tls-cert and --tls-key go together")
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        if path is not None and not path.is_file():
            raise InputError(f"TLS file {str(path)!r} does not exist")
    return TlsFiles(cert=args.tls_cert, key=args.tls_key, ca=args.client_ca)


def _tokenizer(name: str | None) -> Any:
    from verifier.oracles.tokenizer import ByteTokenizer, Tokenizer

    if name is None:
        raise InputError("this kind of model needs --tokenizer")
    if name in ("bytes", "bytes-no-bos"):
        return ByteTokenizer(bos=name == "bytes")
    tokenizer = _resolve(name)()
    if not isinstance(tokenizer, Tokenizer):
        raise InputError(f"{name!r} did not return a tokenizer (encode(text), bos_id)")
    return tokenizer


def _torch_model(args: argparse.Namespace) -> torch.nn.Module:
    if args.model is None:
        raise InputError(f"--kind {args.kind} needs --model")
    return load_model(args.model, args.arch)


def _language_model(args: argparse.Namespace) -> Any:
    from verifier.oracles.hf_lm import load_hf_language_model
    from verifier.oracles.openai_lm import OpenAICompletionsOracle
    from verifier.oracles.torch_lm import TorchLanguageModelOracle

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
        return load_hf_language_model(args.hf, model_name=args.name, max_batch=args.max_batch)
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
    if args.kind == "classifier":
        from verifier.oracles.torch_oracle import TorchClassifierOracle

        if args.n_classes is None and args.input_shape is None:
            raise InputError("give --n-classes, or --input-shape to probe it")
        return TorchClassifierOracle(
            _torch_model(args),
            n_classes=args.n_classes,
            probe_shape=args.input_shape,
            label_only=args.label_only,
            **_image_model_options(args),
        )
    if args.kind == "encoder":
        from verifier.oracles.torch_encoder import TorchEncoderOracle

        return TorchEncoderOracle(_torch_model(args), **_image_model_options(args))
    if args.kind == "clip":
        from verifier.oracles.torch_encoder import TorchImageTextOracle

        return TorchImageTextOracle(
            _torch_model(args),
            _tokenizer(args.tokenizer),
            max_tokens=args.max_tokens,
            **_image_model_options(args),
        )
    return _language_model(args)


def run_serve(args: argparse.Namespace) -> int:
    """Load the model, serve it until SIGINT/SIGTERM, and return the exit status."""
    if args.kind == "classifier" and args.n_classes is None and args.input_shape is None:
        raise InputError("give --n-classes, or --input-shape to probe it")
    host, _ = parse_address(args.listen, what="--listen", port_zero=True)  # before any loading
    tls = _tls(args)
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

    from verifier.oracles.grpc_server import serve_oracle

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    oracle = make_oracle(args)
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        # A port in use is refused by make_server with a one-line InputError.
        server, port = serve_oracle(
            oracle, args.listen, tls=tls, metrics=ops.metrics, reflection=args.reflection
        )
        info = oracle.info
        print(f"listening on {host}:{port}", flush=True)
        if ops.metrics_address is not None:
            print(f"metrics on http://{ops.metrics_address}/metrics", flush=True)
        if args.kind == "classifier":
            print(
                f"model {info.model_name} sha256 {info.model_digest} classes {info.n_classes} "
                f"output {info.classify_output}",
                flush=True,
            )
        else:
            print(
                f"model {info.model_name} digest {info.model_digest} "
                f"capabilities {','.join(info.capabilities)}",
                flush=True,
            )
        while not stop.wait(0.5):
            pass
        server.stop(STOP_GRACE_S).wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
