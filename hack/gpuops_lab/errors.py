"""Errors of the local lab; each names what failed, the evidence and the fix."""

from __future__ import annotations


class LabError(Exception):
    """A failure the user can act on. str() is the whole message."""


class ComponentDied(LabError):
    def __init__(self, name: str, log: str, tail: str, rc: int | None = None) -> None:
        self.name, self.log, self.tail, self.rc = name, log, tail, rc
        status = f"exited with code {rc}" if rc is not None else "is not running"
        super().__init__(f"{name} {status}; its log is {log}. Last lines:\n{tail}")
