"""twinaudit protocol core: encoding, hashing, commitments, Merkle trees, PRG, tests, envelopes.

Pure Python (numpy, scipy, cryptography, msgpack); never imports torch. Everything here
is specified in ``spec/protocol.md``; :data:`SPEC_VERSION` is the version of that
document this code implements, and the conformance suite checks that they agree.
"""

from typing import Final

#: Version of spec/protocol.md implemented by this package.
SPEC_VERSION: Final = "0.2"

__all__ = ["SPEC_VERSION"]
