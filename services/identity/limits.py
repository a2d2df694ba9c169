"""Request-body limits per role and route, enforced from Content-Length before anything reads
the body.

Anonymous requests may send a login form; signed-in non-owners a Dash callback's inputs; only
the owner may send a file (the Data page's upload arrives base64-encoded inside a callback, so
its limit is the upload limit plus a third). The role comes from the server session. A body
must declare its length: a chunked body is refused with 411 (browsers never send one; nginx
re-sends bodies with a length), and Flask would cut any other at the same limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.identity.roles import Role

UPDATE_PATH = "/_dash-update-component"


@dataclass(frozen=True)
class BodyLimits:
    """Largest request body in bytes: anonymous, signed-in non-owner, owner callback."""

    anonymous: int = 16 * 1024
    member: int = 512 * 1024
    owner: int = 68 * 1024 * 1024

    @classmethod
    def for_upload(cls, max_upload_bytes: int, member: int = 512 * 1024) -> BodyLimits:
        """The owner's callback limit from the upload limit (base64 is 4/3 of the file)."""
        return cls(member=member, owner=max(member, max_upload_bytes * 4 // 3 + 256 * 1024))

    @property
    def largest(self) -> int:
        return max(self.anonymous, self.member, self.owner)

    def limit(self, authenticated: bool, role: Role, path: str) -> int:
        if not authenticated:
            return self.anonymous
        if role is Role.OWNER and path.endswith(UPDATE_PATH):
            return self.owner
        return self.member
