"""The practitioner's side: serving her model as an oracle the arbiter can query.

``twinaudit oracle serve`` runs this package; the arbiter's process never imports it (a
model the arbiter holds is served by ``twinaudit oracle serve`` in a sandboxed child).

- :mod:`.grpc_server` — any oracle served as ``twinaudit.oracle.v1.Oracle``;
- :mod:`.formats` — loads a model file in any format ``oracle serve`` takes
  (TorchScript, ``torch.export``, state dict, safetensors, pickle, ONNX);
- :mod:`.torch_oracle`, :mod:`.torch_images`, :mod:`.torch_encoder`, :mod:`.torch_lm`
  — in-process adapters for torch modules (classifiers, image encoders, image-text
  models, language models), with :mod:`.tokenizer`;
- :mod:`.hf` — Hugging Face ``transformers`` classifiers, causal LMs and CLIP-style
  models (optional extra ``hf``);
- :mod:`.openai_lm` — an OpenAI-compatible completions endpoint as a language-model
  oracle;
- :mod:`.defences` — the output defences a practitioner may put in front of a model.

Every adapter implements an interface of :mod:`twinaudit.protocol.oracles`.
"""
