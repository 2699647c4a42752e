"""Text marking (paper §6.2): two versions of each text, close to it and far apart.

- :mod:`owner.text.sources`: reading texts from JSON Lines, CSV or plain text.
- :mod:`owner.text.thesaurus`: the MyThes thesaurus (Debian ``mythes-en-us``).
- :mod:`owner.text.words`: splitting texts into words, the word edit distance.
- :mod:`owner.text.similarity`: the sentence embedder of the utility bound (MiniLM).
- :mod:`owner.text.substitution`: the synonym-swap search, the offline default.
- :mod:`owner.text.paraphrasers`: Hugging Face seq2seq and OpenAI-compatible chat.
- :mod:`owner.text.config`: the recorded marking configuration.
- :mod:`owner.text.marking`: the ``owner mark --kind text`` run into a vault.
- :mod:`owner.text.publication`, :mod:`owner.text.report`: publishing and inspecting.

Nothing here is imported by ``import owner.text``; torch and the Hugging Face
libraries load only with the embedder.
"""
