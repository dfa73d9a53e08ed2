"""Canopy's errors as Python exceptions. Every canopy::Error leaving one of canopy_torch's own functions
(shrink, grow, agree, ...) is one of these; DDP and torch.distributed's calls still raise torch's
RuntimeError carrying Canopy's message, and canopy_torch.failure(group) then says what ended the group.
"""


class CanopyError(RuntimeError):
    """A canopy::Error; `code` is its ErrorCode's name: "PeerFailed", "Revoked", "Timeout", "Mismatch"..."""

    def __init__(self, message, code="Unknown"):
        super().__init__(message)
        self.code = code


class PeerFailure(CanopyError):
    """A peer died, closed its connections or stopped answering (code "PeerFailed")."""


class Revoked(CanopyError):
    """The group was revoked, by this rank or another (code "Revoked"): shrink it to go on."""


class TooFewRanks(CanopyError):
    """Fewer ranks are left than the elastic loop's min_ranks (code "TooFewRanks")."""


_CLASSES = {"PeerFailed": PeerFailure, "Revoked": Revoked, "TooFewRanks": TooFewRanks}


def from_code(code, message):
    """The exception for a canopy::Error of `code` (the C++ translator calls this)."""
    return _CLASSES.get(code, CanopyError)(message, code)
