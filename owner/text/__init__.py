"""Text marking (paper §6.2): two versions of each text, close to it and far apart.

- :mod:`twinaudit.owner.text.sources`: reading texts from JSON Lines, CSV or plain text.
- :mod:`twinaudit.owner.text.thesaurus`: the MyThes thesaurus (Debian ``mythes-en-us``).
- :mod:`twinaudit.owner.text.words`: splitting texts into words, the word edit distance.
- :mod:`twinaudit.owner.text.similarity`: the sentence embedder of the utility bound (MiniLM).
- :mod:`twinaudit.owner.text.substitution`: the synonym-swap search, the offline default.
- :mod:`twinaudit.owner.text.paraphrasers`: Hugging Face seq2seq and OpenAI-compatible chat.
- :mod:`twinaudit.owner.text.config`: the recorded marking configuration.
- :mod:`twinaudit.owner.text.marking`: the ``owner mark --kind text`` run into a vault.
- :mod:`twinaudit.owner.text.publication`, :mod:`twinaudit.owner.text.report`: publishing and
  inspecting.

Nothing here is imported by ``import twinaudit.owner.text``; torch and the Hugging Face
libraries load only with the embedder.
"""
